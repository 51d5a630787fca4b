import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { expireMisfired } from "../../src/store/dispatch-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

// Issue 14, hole 2: an overlap=queue occurrence waiting behind a long run is held with
// due_at = 'infinity' but keeps a start_by; the misfire expiry must not count that wait
// against its grace. Grace counts from its release.
for (const driver of DRIVERS) {
  describe(`a held occurrence keeps its grace until it is released (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    // The first call is held open by the target until the test lets it go.
    let letGo!: () => void;
    const firstHeld = new Promise<void>((r) => (letGo = r));
    const target = new Target(async (_r, n) => {
      if (n === 1) await firstHeld;
      return new Response("ok");
    });

    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "10s" }, { mode: "all" });
    });
    afterAll(async () => {
      letGo();
      await rt?.stop();
      target.stop();
      await t?.close();
    });

    test("overlap=queue + misfire=skip + 1 s grace: the queued occurrence runs after the long one, not expired", async () => {
      const s = await api(rt, "POST", "/v1/schedules", {
        id: "slow-queue",
        cron: "*/2 * * * * *",
        overlap: "queue",
        max_queued: 1,
        misfire: "skip",
        misfire_grace: "1s",
        target: { url: `${target.url}/slow` },
      });
      expect(s.status).toBe(201);
      await target.waitForCalls(1, 10_000);
      const occurrences = () =>
        t.db.query<any>(
          "SELECT id, status, due_at = 'infinity' AS held, nominal_time, scheduled_for, start_by, dead_reason FROM jobs WHERE schedule_id = 'slow-queue' ORDER BY nominal_time",
        );
      // The next occurrence is generated and held behind the running one.
      const held = await eventually(async () => (await occurrences()).find((o) => o.held), 10_000, "a held occurrence");
      // Its nominal time + grace passes while the first run is still being held open by the target.
      await eventually(
        async () => (await t.db.query<any>("SELECT now() > $1::timestamptz AS past", [held.start_by]))[0].past,
        10_000,
        "the held occurrence's grace to pass",
      );
      // The misfire expiry runs (the dispatcher's own pass, and once more here, deterministically).
      await expireMisfired(t.db, 100);
      await Bun.sleep(400);
      const waiting = (await occurrences()).find((o) => o.id === held.id);
      expect({ status: waiting.status, held: waiting.held, dead_reason: waiting.dead_reason }).toEqual({ status: "scheduled", held: true, dead_reason: null });

      letGo();
      // Released when the long run finishes: due then, its grace counted from there.
      const released = await eventually(
        async () => {
          const o = (await occurrences()).find((x) => x.id === held.id);
          return o.status === "succeeded" || o.status === "expired" ? o : undefined;
        },
        10_000,
        "the held occurrence to finish",
      );
      expect({ status: released.status, dead_reason: released.dead_reason }).toEqual({ status: "succeeded", dead_reason: null });
      expect(released.start_by.getTime() - released.scheduled_for.getTime()).toBe(1000);
      expect(released.scheduled_for.getTime()).toBeGreaterThan(held.start_by.getTime());
      const slow = target.callsTo("/slow");
      expect(slow.length).toBeGreaterThanOrEqual(2);
      expect(slow[1].headers["webhook-id"]).toBe(held.id);
      const first = await t.db.query<any>("SELECT finished_at FROM jobs WHERE schedule_id = 'slow-queue' ORDER BY nominal_time LIMIT 1");
      expect(slow[1].at).toBeGreaterThanOrEqual(first[0].finished_at.getTime() - 5);
    });
  });
}
