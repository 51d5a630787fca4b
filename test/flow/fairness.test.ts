/**
 * Fair dispatch through a real scheduler: when more is due than workers can take, priority
 * classes share by weight (and aging bounds the wait of the lowest), tenants share round
 * robin, and tenant quotas hold. Scarce capacity on purpose: 2 worker slots, a slow target.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, type Received, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`fair dispatch (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;
    let target: Target | undefined;
    let maxInFlightByTenant: Record<string, number> = {};
    const nowInFlight: Record<string, number> = {};

    afterEach(async () => {
      await rt?.stop();
      await t?.close();
      target?.stop();
      rt = t = target = undefined;
      maxInFlightByTenant = {};
    });

    /** A target that takes `ms` per call and tracks calls in flight per tenant (first path segment). */
    function slowTarget(ms: number): Target {
      return new Target(async (r) => {
        const tenant = r.path.split("/")[1]!;
        nowInFlight[tenant] = (nowInFlight[tenant] ?? 0) + 1;
        maxInFlightByTenant[tenant] = Math.max(maxInFlightByTenant[tenant] ?? 0, nowInFlight[tenant]!);
        await Bun.sleep(ms);
        nowInFlight[tenant]!--;
        return new Response("ok");
      });
    }
    async function start(env: Record<string, string>): Promise<Runtime> {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { WORKER_CONCURRENCY: "2", SCHEDULER_POLL_INTERVAL: "100ms", ...env });
      return rt;
    }
    async function batch(r: Runtime, jobs: { tenant: string; path: string; priority?: number; runAt: number }[]) {
      for (let i = 0; i < jobs.length; i += 1000) {
        const res = await api(r, "POST", "/v1/jobs/batch", {
          jobs: jobs.slice(i, i + 1000).map((j) => ({
            tenant: j.tenant,
            priority: j.priority ?? 0,
            run_at: new Date(j.runAt).toISOString(),
            target: { url: `${target!.url}/${j.tenant}/${j.path}` },
          })),
        });
        expect(res.status).toBe(200);
        for (const item of res.body.jobs) expect(item.error).toBeUndefined();
      }
    }
    const arrivals = (prefix: string) => target!.calls.filter((c) => c.path.startsWith(prefix));
    const lastAt = (cs: Received[]) => Math.max(...cs.map((c) => c.at));

    test("sustained high-priority load: low priority still runs, within the aging bound", async () => {
      target = slowTarget(50); // 2 slots × 20 calls/s: 40/s at most
      const r = await start({ SCHEDULER_AGING: "1s" });
      const due = Date.now() + 800;
      await batch(r, [
        ...Array.from({ length: 300 }, (_, i) => ({ tenant: "t", path: `high/${i}`, priority: 10, runAt: due })),
        ...Array.from({ length: 5 }, (_, i) => ({ tenant: "t", path: `low/${i}`, priority: -10, runAt: due })),
      ]);
      await eventually(() => arrivals("/t/low/").length === 5, 15_000, "the low-priority jobs to run").catch(async (err: Error) => {
        // Seen once in a full parallel run (PGlite): say how far the run got.
        const byStatus = await t!.db.query("SELECT status, priority, count(*)::int AS n FROM jobs GROUP BY 1, 2 ORDER BY 1, 2");
        throw new Error(`${err.message}; calls: ${arrivals("/t/high/").length} high, ${arrivals("/t/low/").length} low; jobs: ${JSON.stringify(byStatus)}`);
      });
      const done = lastAt(arrivals("/t/low/"));
      // Two aging steps make a low job top class; then it is among the oldest there. The slack
      // is for a loaded machine: PGlite, whose one connection serves the API, claims and
      // completions in turn, took 3.56 s in a full suite run on the slow 2-core VM (2026-12-07).
      // The call count below is the load-independent check.
      expect(done - due).toBeLessThan(2 * 1000 + (driver === "pglite" ? 2500 : 1500));
      // …while most of the high-priority backlog was still waiting: low was not merely last.
      expect(arrivals("/t/high/").filter((c) => c.at <= done).length).toBeLessThan(200);
    });

    test("a flooding tenant does not hold back a quiet one; each is served round robin", async () => {
      target = slowTarget(50);
      const r = await start({});
      const due = Date.now() + 800;
      await batch(r, [
        ...Array.from({ length: 400 }, (_, i) => ({ tenant: "flood", path: `${i}`, runAt: due })),
        ...Array.from({ length: 6 }, (_, i) => ({ tenant: "quiet", path: `${i}`, runAt: due + 300 })),
      ]);
      // Backpressure is visible per tenant (a bounded label set: top tenants + "other").
      const backlog = await eventually(
        async () => {
          const text = await (await fetch(`${r.url}/metrics`)).text();
          const m = /scheduler_tenant_due_backlog\{tenant="flood"\} (\d+)/.exec(text);
          return m && Number(m[1]) > 0 ? text : undefined;
        },
        5000,
        "a flood backlog in /metrics",
      );
      expect(backlog).toContain('scheduler_tenant_due_backlog{tenant="other"} 0');
      await eventually(() => arrivals("/quiet/").length === 6, 15_000, "the quiet tenant's jobs");
      // FIFO would serve 400 flood jobs first (~10 s at 40/s); round robin: about every other
      // slot. Counted in calls, which a starved CPU does not change: ~12 flood calls before the
      // quiet jobs are due, then about one for each quiet one. The time bound has slack for a
      // loaded box (1.6 s seen with four test files at once, 3.3 s with the machine three times
      // overloaded) and is still half of FIFO's.
      const quietDone = lastAt(arrivals("/quiet/"));
      expect(arrivals("/flood/").filter((c) => c.at <= quietDone).length).toBeLessThan(60);
      expect(quietDone - (due + 300)).toBeLessThan(5000);
    });

    test("tenant quotas: a rate cap and an in-flight cap hold; other tenants are not held back", async () => {
      target = slowTarget(200);
      const r = await start({ WORKER_CONCURRENCY: "10", SCHEDULER_TENANT_QUOTAS: "capped:rate=5;narrow:running=2" });
      const due = Date.now() + 800;
      await batch(r, [
        ...Array.from({ length: 15 }, (_, i) => ({ tenant: "capped", path: `${i}`, runAt: due })),
        ...Array.from({ length: 10 }, (_, i) => ({ tenant: "narrow", path: `${i}`, runAt: due })),
        ...Array.from({ length: 10 }, (_, i) => ({ tenant: "free", path: `${i}`, runAt: due })),
      ]);
      await eventually(() => target!.calls.length === 35, 20_000, "every job");
      const capped = arrivals("/capped/")
        .map((c) => c.at)
        .sort((a, b) => a - b);
      // 5/s, the bucket holding one token: claims 200 ms apart, so 15 jobs take at least ~2 s and
      // a second sees 5 (+1 at its edges) claims. These are arrivals at the target, one step
      // later: a call held by a stalled event loop can land beside the next claim's call, one
      // more (7 seen once, the machine three times overloaded). A burst-sized bucket would
      // show 9 in the first second.
      expect(capped.at(-1)! - capped[0]!).toBeGreaterThanOrEqual(1800);
      for (const a of capped) expect(capped.filter((b) => b >= a && b < a + 1000).length).toBeLessThanOrEqual(7);
      expect(maxInFlightByTenant.narrow).toBeLessThanOrEqual(2);
      // The free tenant was done long before the capped one.
      expect(lastAt(arrivals("/free/"))).toBeLessThan(capped.at(-1)!);
      for (const c of target!.calls) expect(c.at).toBeGreaterThanOrEqual(Date.parse(c.headers["scheduler-scheduled-for"]!));
    });
  });
}
