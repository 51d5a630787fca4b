import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { afterAPass, api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";

// Short leases so that a lapse is seen within seconds; the reaper passes every 750 ms (a
// quarter of the 3 s worker lease of the test config).
const ASYNC_LEASE_MS = 2000;
const ENV = { SCHEDULER_ASYNC_LEASE: `${ASYNC_LEASE_MS}ms` };

/** The target side of async jobs: answers 202 to accept, or hangs on /hang (a sync call that never answers). */
function asyncTarget(): Target {
  return new Target((r: Received) => (r.path.startsWith("/hang") ? Bun.sleep(20_000).then(() => new Response("late")) : new Response(null, { status: 202 })));
}

const tokenOf = (r: Received) => r.headers["scheduler-lease-token"]!;
const genOf = (token: string) => Number(token.split(".")[1]);

for (const driver of DRIVERS) {
  describe(`async jobs (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    const target = asyncTarget();

    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, ENV);
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
      target.stop();
    });

    const create = async (body: Record<string, unknown>) => {
      const r = await api(rt, "POST", "/v1/jobs", body);
      expect(r.status).toBe(201);
      return r.body;
    };
    const job = async (id: string) => (await api(rt, "GET", `/v1/jobs/${id}`)).body;
    const nthCall = (path: string, n: number, ms = 10_000) => eventually(() => target.callsTo(path)[n - 1], ms, `call ${n} to ${path}`);
    /** Waits until the worker has recorded the acceptance (the attempt shows the 202). */
    const accepted = (id: string, n = 1) =>
      eventually(
        async () => {
          const j = await job(id);
          const a = j.attempt_log?.[n - 1];
          return j.status === "running" && a?.outcome === "in_flight" && a?.http_status === 202 ? j : undefined;
        },
        10_000,
        `job ${id} accepted`,
      );
    const heartbeat = (id: string, body: Record<string, unknown>) => api(rt, "POST", `/v1/jobs/${id}/heartbeat`, body);
    const complete = (id: string, body: Record<string, unknown>) => api(rt, "POST", `/v1/jobs/${id}/complete`, body);
    const leaseUntil = async (id: string) => (await t.db.query<{ lease_until: Date }>("SELECT lease_until FROM jobs WHERE id = $1", [id]))[0].lease_until;

    test("accepted by a 2xx → stays running, frees the worker slot → heartbeat extends the lease → complete succeeded", async () => {
      const j = await create({ target: { url: `${target.url}/ok` }, async: true, timeout: "2h" });
      const call = await nthCall("/ok", 1);
      const token = tokenOf(call);
      expect(token).toMatch(/^v1\.\d+\.[A-Za-z0-9_-]{43}$/);
      expect(call.headers["scheduler-checkpoint"]).toBeUndefined();
      const running = await accepted(j.id);
      expect(running).toMatchObject({ async: true, timeout: "2h", checkpoint: null });
      expect(running.lease_key).toBeUndefined();
      // The worker keeps no slot for it.
      await eventually(() => rt.worker!.inflight.size === 0, 2000, "worker slot free");
      const first = await heartbeat(j.id, { lease_token: token });
      expect(first.status).toBe(200);
      await Bun.sleep(50);
      const hb = await heartbeat(j.id, { lease_token: token, checkpoint: { page: 7 } });
      expect(hb.status).toBe(200);
      expect(hb.body.cancel_requested).toBe(false);
      // Each heartbeat moves the lease to now + SCHEDULER_ASYNC_LEASE.
      expect(Date.parse(hb.body.lease_until)).toBeGreaterThan(Date.parse(first.body.lease_until));
      expect((await leaseUntil(j.id)).getTime()).toBe(Date.parse(hb.body.lease_until));
      expect(Date.parse(hb.body.lease_until) - Date.now()).toBeGreaterThan(ASYNC_LEASE_MS - 500);
      expect(Date.parse(hb.body.deadline_at)).toBeGreaterThan(Date.now() + 3_500_000);
      expect((await job(j.id)).checkpoint).toEqual({ page: 7 });
      const done = await complete(j.id, { lease_token: token, outcome: "succeeded" });
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ id: j.id, status: "succeeded", last_error: null });
      const after = await job(j.id);
      expect(after.attempt_log).toHaveLength(1);
      expect(after.attempt_log[0]).toMatchObject({ outcome: "success", http_status: 202 });
      expect(after.attempt_log[0].finished_at).not.toBeNull();
      // After completion the token is stale: 409, nothing changes.
      const late = await heartbeat(j.id, { lease_token: token });
      expect(late.status).toBe(409);
      expect(late.body.error.code).toBe("stale_lease");
      expect((await complete(j.id, { lease_token: token, outcome: "failed" })).status).toBe(409);
      expect((await job(j.id)).status).toBe("succeeded");
      expect(target.callsTo("/ok")).toHaveLength(1);
    });

    test("a lapsed lease runs the job again with the stored checkpoint; the old token is stale (409) and changes nothing", async () => {
      const j = await create({ target: { url: `${target.url}/lapse` }, async: true, timeout: "1h", retry: { max_attempts: 3 } });
      const first = await nthCall("/lapse", 1);
      const token1 = tokenOf(first);
      await accepted(j.id);
      expect((await heartbeat(j.id, { lease_token: token1, checkpoint: { step: 3, note: "ü" } })).status).toBe(200);
      // No more heartbeats: the lease lapses and the reaper hands the job out again.
      const second = await nthCall("/lapse", 2, ASYNC_LEASE_MS + 8000);
      expect(second.at - first.at).toBeGreaterThanOrEqual(ASYNC_LEASE_MS - 100);
      expect(second.headers["scheduler-attempt"]).toBe("2");
      expect(JSON.parse(Buffer.from(second.headers["scheduler-checkpoint"]!, "base64url").toString())).toEqual({ step: 3, note: "ü" });
      const token2 = tokenOf(second);
      expect(genOf(token2)).toBeGreaterThan(genOf(token1));
      const j2 = await accepted(j.id, 2);
      expect(j2.attempt_log[0]).toMatchObject({ outcome: "lost", possibly_delivered: true });
      const snapshot = await t.db.query("SELECT status, lease_until, checkpoint, tries, version, updated_at FROM jobs WHERE id = $1", [j.id]);
      const hb = await heartbeat(j.id, { lease_token: token1, checkpoint: { step: 99 } });
      expect(hb.status).toBe(409);
      expect(hb.body.error.code).toBe("stale_lease");
      const c = await complete(j.id, { lease_token: token1, outcome: "succeeded" });
      expect(c.status).toBe(409);
      expect(await t.db.query("SELECT status, lease_until, checkpoint, tries, version, updated_at FROM jobs WHERE id = $1", [j.id])).toEqual(snapshot);
      expect((await complete(j.id, { lease_token: token2, outcome: "succeeded" })).body.status).toBe("succeeded");
      const metrics = await (await fetch(`${rt.url}/metrics`)).text();
      expect(metrics).toMatch(/scheduler_lease_expiries_total\{state="running"\} [1-9]/);
      expect(metrics).toMatch(/scheduler_async_heartbeats_total\{result="ok"\} [1-9]/);
      expect(metrics).toMatch(/scheduler_async_heartbeats_total\{result="stale"\} [1-9]/);
    });

    test("the execution ceiling (timeout) ends a job that keeps heartbeating: failed as unknown, through the retry rules", async () => {
      const j = await create({ target: { url: `${target.url}/ceiling` }, async: true, timeout: "1500ms", retry: { max_attempts: 1 } });
      const call = await nthCall("/ceiling", 1);
      await accepted(j.id);
      let refusedAt = 0;
      let last: Awaited<ReturnType<typeof heartbeat>> | undefined;
      while (Date.now() - call.at < 6000) {
        last = await heartbeat(j.id, { lease_token: tokenOf(call) });
        if (last.status !== 200) {
          refusedAt = Date.now();
          break;
        }
        await Bun.sleep(200);
      }
      expect(last!.status).toBe(409);
      // Ended by the heartbeat that found the ceiling passed, or by the reaper just before.
      expect(["timed_out", "stale_lease"]).toContain(last!.body.error.code);
      // Not before the ceiling: it counts from the attempt's start in the database, which comes
      // before the call reaches the target (by 150 ms once, the machine three times overloaded).
      expect(refusedAt - call.at).toBeGreaterThanOrEqual(1000);
      expect(refusedAt - call.at).toBeLessThan(1500 + 1500);
      const done = await job(j.id);
      expect(done).toMatchObject({ status: "dead", dead_reason: "max_attempts" });
      expect(done.last_error).toContain("timed out");
      expect(done.attempt_log[0]).toMatchObject({ outcome: "unknown", possibly_delivered: true });
      expect(await (await fetch(`${rt.url}/metrics`)).text()).toMatch(/scheduler_async_timeouts_total [1-9]/);
    });

    test("cooperative cancel: the next heartbeat answers cancel_requested, the target's completion ends it cancelled", async () => {
      const j = await create({ target: { url: `${target.url}/cancel` }, async: true, timeout: "1h" });
      const token = tokenOf(await nthCall("/cancel", 1));
      await accepted(j.id);
      const c = await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {});
      expect(c.status).toBe(202);
      const hb = await heartbeat(j.id, { lease_token: token });
      expect(hb.status).toBe(200);
      expect(hb.body.cancel_requested).toBe(true);
      const done = await complete(j.id, { lease_token: token, outcome: "failed", error: "stopped on request" });
      expect(done.status).toBe(200);
      expect(done.body.status).toBe("cancelled");
      expect((await job(j.id)).attempt_log[0].outcome).toBe("failed");
      await afterAPass([rt]);
      expect(target.callsTo("/cancel")).toHaveLength(1);
    });

    test("a synchronous call in flight is aborted by a cancel: cancelled at once, not retried", async () => {
      const j = await create({ target: { url: `${target.url}/hang` }, timeout: "30s", retry: { max_attempts: 5, base: "10ms", max: "10ms" } });
      await nthCall("/hang", 1);
      const at = Date.now();
      expect((await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {})).status).toBe(202);
      const done = await eventually(
        async () => {
          const x = await job(j.id);
          return x.status === "cancelled" ? x : undefined;
        },
        3000,
        "cancelled",
      );
      expect(Date.now() - at).toBeLessThan(2000);
      expect(done.attempt_log).toHaveLength(1);
      expect(done.attempt_log[0].error).toContain("cancel");
      await afterAPass([rt]);
      expect(target.callsTo("/hang")).toHaveLength(1);
    });

    test("forged, malformed or another job's tokens are refused (401) and change nothing; no bearer token is needed", async () => {
      const a = await create({ target: { url: `${target.url}/forge-a` }, async: true, timeout: "1h" });
      const b = await create({ target: { url: `${target.url}/forge-b` }, async: true, timeout: "1h" });
      const tokenA = tokenOf(await nthCall("/forge-a", 1));
      const tokenB = tokenOf(await nthCall("/forge-b", 1));
      await accepted(a.id);
      const before = await t.db.query("SELECT status, lease_until, checkpoint, updated_at FROM jobs WHERE id = $1", [a.id]);
      const forged = `v1.${genOf(tokenA)}.${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url")}`;
      for (const lease_token of [forged, tokenB, "nonsense", `v1.${genOf(tokenA) + 1}.${tokenA.split(".")[2]}`]) {
        const hb = await heartbeat(a.id, { lease_token, checkpoint: { x: 1 } });
        expect(hb.status).toBe(401);
        expect(hb.body.error.code).toBe("invalid_lease_token");
        expect((await complete(a.id, { lease_token, outcome: "succeeded" })).status).toBe(401);
      }
      expect((await heartbeat(Bun.randomUUIDv7(), { lease_token: tokenA })).status).toBe(401);
      expect((await heartbeat(a.id, {})).status).toBe(400);
      expect((await heartbeat(a.id, { lease_token: tokenA, checkpoint: "x".repeat(5000) })).body.error.path).toBe("checkpoint");
      expect(await t.db.query("SELECT status, lease_until, checkpoint, updated_at FROM jobs WHERE id = $1", [a.id])).toEqual(before);
      for (const [id, token] of [
        [a.id, tokenA],
        [b.id, tokenB],
      ])
        expect((await complete(id, { lease_token: token, outcome: "succeeded" })).status).toBe(200);
    });

    test("complete failed with retry_after: rescheduled no sooner than that, a try used up, a new token for the next attempt", async () => {
      const j = await create({ target: { url: `${target.url}/retry` }, async: true, timeout: "1h", retry: { max_attempts: 3, base: "10ms", max: "10ms" } });
      const token1 = tokenOf(await nthCall("/retry", 1));
      await accepted(j.id);
      const failedAt = Date.now();
      const r = await complete(j.id, { lease_token: token1, outcome: "failed", error: "upstream busy", retry_after: "1s" });
      expect(r.status).toBe(200);
      expect(r.body.status).toBe("scheduled");
      expect(r.body.last_error).toContain("upstream busy");
      expect(Date.parse(r.body.due_at) - failedAt).toBeGreaterThanOrEqual(900);
      const second = await nthCall("/retry", 2, 5000);
      expect(second.at - failedAt).toBeGreaterThanOrEqual(950);
      expect(second.headers["scheduler-attempt"]).toBe("2");
      const token2 = tokenOf(second);
      expect(token2).not.toBe(token1);
      await accepted(j.id, 2);
      expect((await complete(j.id, { lease_token: token2, outcome: "succeeded" })).body.status).toBe("succeeded");
      expect((await job(j.id)).attempt_log.map((a: any) => a.outcome)).toEqual(["failed", "success"]);
    });

    test("a schedule with async: true makes async occurrences (lease token, callback completion)", async () => {
      const sync = await api(rt, "POST", "/v1/schedules", { cron: "0 9 * * *", target: { url: `${target.url}/x` }, timeout: "2h" });
      expect(sync.status).toBe(400);
      expect(sync.body.error.path).toBe("timeout");
      const s = await api(rt, "POST", "/v1/schedules", {
        id: `async-${driver}`,
        cron: "* * * * * *",
        target: { url: `${target.url}/sched` },
        async: true,
        timeout: "2h",
      });
      expect(s.status).toBe(201);
      expect(s.body).toMatchObject({ async: true, timeout: "2h" });
      try {
        const call = await nthCall("/sched", 1, 5000);
        const id = call.headers["webhook-id"]!;
        const occ = await accepted(id);
        expect(occ).toMatchObject({ schedule_id: `async-${driver}`, async: true });
        expect((await complete(id, { lease_token: tokenOf(call), outcome: "succeeded" })).body.status).toBe("succeeded");
      } finally {
        expect((await api(rt, "DELETE", `/v1/schedules/async-${driver}`)).status).toBe(200);
      }
    });

    test("validation: async allows a timeout up to 7 days, sync keeps 1 h; a sync job has no lease routes", async () => {
      const bad = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/x` }, timeout: "2h", delay: "1h" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.path).toBe("timeout");
      const ok = await create({ target: { url: `${target.url}/x` }, async: true, timeout: "7d", delay: "1h" });
      expect(ok.timeout).toBe("7d");
      const r = await complete(ok.id, { lease_token: "v1.0.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", outcome: "succeeded", retry_after: "1s" });
      expect(r.status).toBe(400);
      expect(r.body.error.path).toBe("retry_after");
    });
  });
}

describe("async jobs across processes (postgres)", () => {
  test("a lapsed lease resumes from the checkpoint on another worker; lease routes are writes (fly-replay outside home)", async () => {
    const t = await freshDb("postgres");
    const target = asyncTarget();
    const apiRt = await startScheduler(t.db, ENV, { mode: "api" });
    const disp = await startScheduler(t.db, ENV, { mode: "dispatcher" });
    let w1: Runtime | undefined = await startScheduler(t.db, ENV, { mode: "worker" });
    let w2: Runtime | undefined;
    const standby = await startScheduler(t.db, { ...ENV, REGION: "fra", HOME_REGION: "local" }, { mode: "api" });
    try {
      const j = (await api(apiRt, "POST", "/v1/jobs", { target: { url: `${target.url}/resume` }, async: true, timeout: "1h" })).body;
      const first = await eventually(() => target.callsTo("/resume")[0], 10_000, "first call");
      const token1 = tokenOf(first);
      const w1Owner = w1.worker!.owner;
      const hb = await api(apiRt, "POST", `/v1/jobs/${j.id}/heartbeat`, { lease_token: token1, checkpoint: { rows_done: 5000 } });
      expect(hb.status).toBe(200);
      const away = await api(standby, "POST", `/v1/jobs/${j.id}/heartbeat`, { lease_token: token1 });
      expect(away.status).toBe(409);
      expect(away.headers.get("fly-replay")).toBe("region=local");
      // The first worker goes away (a deploy); the target's process dies too: no heartbeats.
      await w1.stop();
      w1 = undefined;
      w2 = await startScheduler(t.db, ENV, { mode: "worker" });
      const second = await eventually(() => target.callsTo("/resume")[1], ASYNC_LEASE_MS + 8000, "second call");
      expect(JSON.parse(Buffer.from(second.headers["scheduler-checkpoint"]!, "base64url").toString())).toEqual({ rows_done: 5000 });
      const done = await api(apiRt, "POST", `/v1/jobs/${j.id}/complete`, { lease_token: tokenOf(second), outcome: "succeeded" });
      expect(done.status).toBe(200);
      expect(done.body.status).toBe("succeeded");
      const log = (await api(apiRt, "GET", `/v1/jobs/${j.id}`)).body.attempt_log;
      expect(log.map((a: any) => a.outcome)).toEqual(["lost", "success"]);
      expect(log[0].worker).toBe(w1Owner);
      expect(log[1].worker).toBe(w2.worker!.owner);
    } finally {
      for (const r of [standby, w2, w1, disp, apiRt]) await r?.stop();
      await t.close();
      target.stop();
    }
  });
});
