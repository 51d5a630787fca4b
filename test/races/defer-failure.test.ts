// Claimed jobs split by their hosts' limits: some go now, some are handed back for later.
// The hand-back (DeferJobs) failing must not keep the jobs cleared to go from starting: they
// would sit claimed until their leases lapse (here 30 s) for a statement about other jobs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { withTestFaults } from "../../src/store/test-faults.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`a failed hand-back of throttled jobs (${driver})`, () => {
    let t: TestDb;
    const slow = new Target();
    const free = new Target();
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(async () => {
      await t?.close();
      slow.stop();
      free.stop();
    });

    test("DeferJobs always failing: the jobs whose host has room are still called at once", async () => {
      const db = withTestFaults(t.db, [{ query: "DeferJobs", code: "40P01", probability: 1 }]);
      const rt: Runtime = await startScheduler(db, { SCHEDULER_LEASE_TTL: "30s" });
      try {
        // One batch, due at once: one claim takes them all, so one pass sorts them.
        const items = [
          ...[0, 1, 2].map((i) => ({ target: { url: `${slow.url}/slow/${i}` }, host_limits: { rate: 0.1 } })),
          ...[0, 1, 2].map((i) => ({ target: { url: `${free.url}/free/${i}` } })),
        ];
        const r = await api(rt, "POST", "/v1/jobs/batch", { jobs: items });
        expect(r.status).toBe(200);
        const started = Date.now();
        await eventually(() => [0, 1, 2].every((i) => free.callsTo(`/free/${i}`).length === 1), 5_000, "the unthrottled jobs to be called");
        expect(Date.now() - started).toBeLessThan(5_000);
        // The throttled host gets its one call now (after its own pre-call check: the free
        // jobs' claim was theirs, so they may be called first); the others wait for their
        // host, uncalled (at 0.1/s the next one is 10 s away).
        const slowCalls = () => [0, 1, 2].map((i) => slow.callsTo(`/slow/${i}`).length).reduce((a, b) => a + b);
        await eventually(() => slowCalls() >= 1, 2_000, "the throttled host's one call");
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(slowCalls()).toBe(1);
      } finally {
        await rt.stop();
      }
    });
  });
}
