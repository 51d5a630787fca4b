// Issue 16, hole 7: host_limits a job sets pace its own tenant's calls to that host only.
// Before, the limiter was keyed by host and "the tightest limit among the jobs held or in
// flight applies to every call": tenant a's `rate: 0.001` to a shared host paced tenant b's
// calls there too (and, with an operator rate set, pushed the host's next slot 1000 s out).
// Real scheduler, real loopback targets (each Target on its own port: its own host); both
// drivers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

async function batch(rt: Runtime, jobs: Record<string, unknown>[]) {
  const r = await api(rt, "POST", "/v1/jobs/batch", { jobs });
  expect(r.status).toBe(200);
  for (const j of r.body.jobs) if (!j.id) throw new Error(`not created: ${JSON.stringify(j)}`);
  return r.body.jobs as { id: string }[];
}

const B_JOBS = 10;
/** Ten calls at full speed take milliseconds; paced at 0.001/s, one per 1000 s. Generous for a loaded box. */
const FULL_SPEED_MS = 8_000;

for (const driver of DRIVERS) {
  describe(`one tenant's host_limits and another tenant's calls to the same host (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    // a's call to the slow path stays in flight while b's calls are made.
    let release: () => void = () => {};
    const slowGate = new Promise<void>((r) => (release = r));
    const shared = new Target((r) => (r.path.startsWith("/a-slow") ? slowGate.then(() => new Response("ok")) : new Response("ok")));
    const sharedPaced = new Target();

    beforeAll(async () => {
      t = await freshDb(driver);
      // An operator rate per host, high enough not to matter for ten calls.
      rt = await startScheduler(t.db, { SCHEDULER_HOST_RATE: "200", WORKER_CONCURRENCY: "20" });
    });
    afterAll(async () => {
      release();
      await rt?.stop();
      await t?.close();
      shared.stop();
      sharedPaced.stop();
    });

    test("while tenant a's call with rate 0.001 is in flight, tenant b's calls to that host go at full speed", async () => {
      await batch(rt, [{ tenant: "a", target: { url: `${shared.url}/a-slow` }, host_limits: { rate: 0.001, concurrency: 1 }, timeout: "60s" }]);
      await eventually(() => shared.callsTo("/a-slow").length === 1, 15_000, "tenant a's call in flight");
      const t0 = Date.now();
      await batch(
        rt,
        Array.from({ length: B_JOBS }, (_, i) => ({ tenant: "b", target: { url: `${shared.url}/b/${i}` } })),
      );
      await eventually(() => shared.calls.filter((c) => c.path.startsWith("/b/")).length === B_JOBS, FULL_SPEED_MS, `tenant b's ${B_JOBS} calls`);
      expect(Date.now() - t0).toBeLessThan(FULL_SPEED_MS);
      // a's own limit still holds for a: its next call to the host waits (concurrency 1, 0.001/s).
      await batch(rt, [{ tenant: "a", target: { url: `${shared.url}/a-next` }, host_limits: { rate: 0.001, concurrency: 1 } }]);
      await Bun.sleep(1500);
      expect(shared.callsTo("/a-next")).toHaveLength(0);
      release();
    });

    test("after tenant a's call with rate 0.001 ended, tenant b's calls to that host are not pushed 1000 s out", async () => {
      await batch(rt, [{ tenant: "a", target: { url: `${sharedPaced.url}/a` }, host_limits: { rate: 0.001 } }]);
      await eventually(() => sharedPaced.callsTo("/a").length === 1, 15_000, "tenant a's call");
      // The call has been answered; give its completion a moment.
      await Bun.sleep(200);
      const t0 = Date.now();
      await batch(
        rt,
        Array.from({ length: B_JOBS }, (_, i) => ({ tenant: "b", target: { url: `${sharedPaced.url}/b/${i}` } })),
      );
      await eventually(() => sharedPaced.calls.filter((c) => c.path.startsWith("/b/")).length === B_JOBS, FULL_SPEED_MS, `tenant b's ${B_JOBS} calls`);
      expect(Date.now() - t0).toBeLessThan(FULL_SPEED_MS);
    });

    test("tenant b's own host_limits to the same host do not slow tenant c", async () => {
      const c = new Target((r) => (r.path === "/b-slow" ? Bun.sleep(4000).then(() => new Response("ok")) : new Response("ok")));
      try {
        await batch(rt, [{ tenant: "b", target: { url: `${c.url}/b-slow` }, host_limits: { concurrency: 1, rate: 0.01 } }]);
        await eventually(() => c.callsTo("/b-slow").length === 1, 15_000, "tenant b's call in flight");
        await batch(
          rt,
          Array.from({ length: B_JOBS }, (_, i) => ({ tenant: "c", target: { url: `${c.url}/c/${i}` }, host_limits: { rate: 100 } })),
        );
        await eventually(() => c.calls.filter((x) => x.path.startsWith("/c/")).length === B_JOBS, FULL_SPEED_MS, `tenant c's ${B_JOBS} calls`);
        // All of c's calls came while b's slow call was still in flight.
        expect(c.callsTo("/b-slow")).toHaveLength(1);
      } finally {
        c.stop();
      }
    });
  });
}
