/**
 * A 9:00 herd of schedules: the dispatcher's first generation pass takes 100 due schedules;
 * while passes come back full it takes 500 a pass, one right after the other, even while the
 * worker in its process is full (its first occurrences keep it busy). Before, every pass took
 * 100 and waited the full worker's recheck between passes: 10,000 schedules were made over
 * ~3.5 s of a 9:00 herd (bench/README.md, issue 15 part 24). Once a pass comes back short the
 * next herd starts at 100 again, so a few due schedules hold their locks briefly.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import type { Db } from "../../src/store/db.ts";
import type { ShardFence } from "../../src/store/shards.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

/** `n` hourly schedules due at the last full hour (on time: a grace of 2 h), and a NOTIFY. */
async function dueSchedules(db: Db, from: number, n: number): Promise<void> {
  await db.query(
    `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                            misfire, misfire_grace_ms, catchup_window_ms, overlap, next_fire_at)
     SELECT 'default', 'herd-' || g, '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}',
            3, 1000, 60000, 5000, 'skip', 7200000, 86400000, 'skip', date_trunc('hour', now())
     FROM generate_series(${from}, ${from + n - 1}) g`,
  );
  await db.query("SELECT pg_notify('scheduler_due', (extract(epoch FROM date_trunc('hour', now())) * 1000)::bigint::text)");
}

const occurrences = async (db: Db) => Number((await db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs"))[0]!.n);

for (const driver of DRIVERS) {
  describe(`a herd of due schedules (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;

    afterEach(async () => {
      await rt?.stop();
      await t?.close();
      rt = t = undefined;
    });

    test("passes of 100, then 500 while they come back full; the next herd starts at 100", async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_POLL_INTERVAL: "5s" });
      // Full throughout: the occurrences stay scheduled, and every pass finds the worker full.
      let asked = 0;
      rt.worker!.wantsMore = () => {
        asked++;
        return false;
      };
      const generator = rt.dispatcher!.generator;
      const run = generator.runOnce.bind(generator);
      const passes: [number | undefined, number][] = [];
      generator.runOnce = async (fence: ShardFence, batch?: number) => {
        const n = await run(fence, batch);
        if (n > 0) passes.push([batch, n]);
        return n;
      };

      await dueSchedules(t.db, 1, 750);
      await eventually(async () => (await occurrences(t!.db)) === 750, 20_000, "750 occurrences made");
      expect(passes).toEqual([
        [100, 100],
        [500, 500],
        [500, 150],
      ]);
      expect(asked).toBeGreaterThan(0);

      passes.length = 0;
      await dueSchedules(t.db, 751, 120);
      await eventually(async () => (await occurrences(t!.db)) === 870, 20_000, "120 more occurrences made");
      expect(passes).toEqual([
        [100, 100],
        [500, 20],
      ]);
    }, 60_000);
  });
}
