/**
 * A generation pass that fails (its transaction lost: a cancelled statement, a fence lock
 * that failed) is tried again after a wait that doubles while passes keep failing, from
 * 100 ms to the poll interval. Before, with a schedule due, the dispatcher tried again on
 * every pass, ~10 ms apart, and logged an error line each time (~100 a second for as long as
 * the fault lasted). Forced here: DueSchedules fails its first four runs.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { withTestFaults } from "../../src/store/test-faults.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { memoryLogger } from "../helpers/log.ts";
import { startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

/** A fault armed for the first `n` runs of its query, then off. */
const firstN = (n: number) => () => (n-- > 0 ? 0 : 1);

for (const driver of DRIVERS) {
  describe(`a failing generation pass (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;

    afterEach(async () => {
      await rt?.stop();
      await t?.close();
      rt = t = undefined;
    });

    test("is tried again after 100, 200, 400 ms, one error line each, and the occurrence comes once it passes", async () => {
      t = await freshDb(driver);
      const failedAt: number[] = [];
      const db = withTestFaults(t.db, [{ query: "DueSchedules", code: "57014", probability: 1 }], {
        random: firstN(4),
        onInject: () => failedAt.push(performance.now()),
      });
      const m = memoryLogger("info");
      rt = await startScheduler(db, { SCHEDULER_POLL_INTERVAL: "5s" }, { log: m.log });
      await t.db.query(
        `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                                misfire, misfire_grace_ms, catchup_window_ms, overlap, next_fire_at)
         VALUES ('default', 'retried', '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}',
                 3, 1000, 60000, 5000, 'skip', 7200000, 86400000, 'skip', date_trunc('hour', now()))`,
      );
      await t.db.query("SELECT pg_notify('scheduler_due', (extract(epoch FROM date_trunc('hour', now())) * 1000)::bigint::text)");
      await eventually(
        async () => Number((await t!.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE schedule_id = 'retried'"))[0]!.n) === 1,
        10_000,
        "the occurrence made",
      );
      expect(failedAt).toHaveLength(4);
      const gaps = failedAt.slice(1).map((at, i) => at - failedAt[i]!);
      // Before: ~10 ms each. A pass may come later than its retry, never sooner.
      expect(gaps[0]!).toBeGreaterThanOrEqual(95);
      expect(gaps[1]!).toBeGreaterThanOrEqual(195);
      expect(gaps[2]!).toBeGreaterThanOrEqual(395);
      const lines = m.find("occurrence generation failed");
      expect(lines).toHaveLength(4);
      expect(lines.map((l) => l.retry_in_ms)).toEqual([100, 200, 400, 800]);
    }, 30_000);
  });
}
