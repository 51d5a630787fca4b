/**
 * Reserved capacity: SCHEDULER_RESERVED_SLOTS=2:5 keeps 2 of a worker's 4 slots for jobs of
 * priority 5 or more. A flood of slow ordinary jobs fills only the other 2, and urgent jobs
 * created behind the flood start at once, through the direct path (dispatcher and worker in
 * one process) and through the queue (worker processes apart from the dispatcher).
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

describe("reserved worker slots (postgres)", () => {
  let t: TestDb | undefined;
  const rts: Runtime[] = [];
  let target: Target | undefined;
  let lowNow = 0;
  let lowMax = 0;

  afterEach(async () => {
    for (const r of rts.splice(0)) await r.stop();
    await t?.close();
    target?.stop();
    t = target = undefined;
    lowNow = lowMax = 0;
  });

  /** Ordinary calls take 1.5 s and are counted in flight; urgent ones answer at once. */
  function start(): Target {
    return new Target(async (r) => {
      if (!r.path.startsWith("/low/")) return new Response("ok");
      lowNow++;
      lowMax = Math.max(lowMax, lowNow);
      await Bun.sleep(1500);
      lowNow--;
      return new Response("ok");
    });
  }

  async function flood(api0: Runtime, n: number) {
    const res = await api(api0, "POST", "/v1/jobs/batch", { jobs: Array.from({ length: n }, (_, i) => ({ target: { url: `${target!.url}/low/${i}` } })) });
    expect(res.status).toBe(200);
    await eventually(() => lowNow === 2, 5000, "the ordinary jobs to fill their slots");
  }

  async function urgent(api0: Runtime): Promise<number> {
    const at = Date.now();
    const res = await api(api0, "POST", "/v1/jobs/batch", {
      jobs: Array.from({ length: 2 }, (_, i) => ({ priority: 5, target: { url: `${target!.url}/high/${i}` } })),
    });
    expect(res.status).toBe(200);
    return at;
  }

  const env = { WORKER_CONCURRENCY: "4", SCHEDULER_RESERVED_SLOTS: "2:5", SCHEDULER_POLL_INTERVAL: "100ms" };

  test("one process: urgent jobs take the reserved slots while ordinary ones hold the rest", async () => {
    target = start();
    t = await freshDb("postgres");
    const rt = await startScheduler(t.db, env);
    rts.push(rt);
    await flood(rt, 20);
    const at = await urgent(rt);
    await eventually(() => target!.calls.filter((c) => c.path.startsWith("/high/")).length === 2, 3000, "the urgent calls");
    const highAt = Math.max(...target.calls.filter((c) => c.path.startsWith("/high/")).map((c) => c.at));
    // Well before an ordinary slot frees (1.5 s per ordinary call).
    expect(highAt - at).toBeLessThan(1000);
    expect(lowNow).toBe(2);
    await Bun.sleep(1700);
    expect(lowMax).toBe(2);
  }, 20_000);

  test("dispatcher and worker apart: a full queue of ordinary jobs does not block the reserved class", async () => {
    target = start();
    t = await freshDb("postgres");
    const disp = await startScheduler(t.db, env, { mode: "dispatcher" });
    rts.push(disp);
    const apiRt = await startScheduler(t.db, env, { mode: "api" });
    rts.push(apiRt);
    rts.push(await startScheduler(t.db, env, { mode: "worker" }));
    await flood(apiRt, 60);
    const [q] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM jobs WHERE status = 'queued'");
    expect(Number(q!.n)).toBeGreaterThan(0);
    const at = await urgent(apiRt);
    await eventually(() => target!.calls.filter((c) => c.path.startsWith("/high/")).length === 2, 3000, "the urgent calls");
    const highAt = Math.max(...target.calls.filter((c) => c.path.startsWith("/high/")).map((c) => c.at));
    expect(highAt - at).toBeLessThan(1000);
    expect(lowMax).toBe(2);
  }, 20_000);
});
