import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { insertJob } from "../helpers/jobs.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

for (const driver of DRIVERS) {
  describe(`delivery end to end (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    const base = (r: Received) => {
      const m = /^\/status\/(\d+)$/.exec(r.path);
      if (m) return new Response("x", { status: Number(m[1]) });
      if (r.path === "/redirect") return new Response(null, { status: 302, headers: { location: "/ok" } });
      if (r.path === "/slow") return Bun.sleep(2000).then(() => new Response("late"));
      return new Response("ok");
    };
    const target = new Target(base);

    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_SIGNING_SECRET: SECRET });
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
    const settled = (id: string, status: string, ms = 10_000) =>
      eventually(
        async () => {
          const j = await job(id);
          return j.status === status ? j : undefined;
        },
        ms,
        `job ${id} to be ${status}`,
      );

    test("a job due in 200 ms is called promptly after its due time, never before", async () => {
      const j = await create({ target: { url: `${target.url}/soon`, body: { n: 1 } }, delay: "200ms" });
      const done = await settled(j.id, "succeeded");
      const call = target.callsTo("/soon")[0];
      const due = Date.parse(j.due_at);
      expect(call.at).toBeGreaterThanOrEqual(due);
      // Promptly: typical is ~10 ms (see bench/), 30-60 ms here with four busy loops beside
      // it. The bound is for a loaded 2-core CI box: 178 ms seen once in a full run, and this test
      // failed a 300 ms bound in one CI run (2026-12-05, at half this box's usual speed; the
      // assertion was not kept, this is the likely one). The
      // wake-up itself is pinned down where a 5 s poll cannot stand in for it
      // (dispatcher/due-during-claim, races/full-worker-wake); never early on either driver.
      expect(call.at - due).toBeLessThan(1000);
      expect(done.attempts).toBe(1);
      expect(done.attempt_log).toHaveLength(1);
      expect(done.attempt_log[0]).toMatchObject({ number: 1, outcome: "success", http_status: 200, epoch: expect.any(Number) });
    });

    test("the target receives the method, headers and body, plus every header of the contract, signed", async () => {
      const j = await create({
        target: { url: `${target.url}/headers`, method: "PUT", headers: { "x-a": "b" }, body: { hello: "world" } },
        idempotency_key: `inv-${driver}`,
      });
      const done = await settled(j.id, "succeeded");
      const c = target.callsTo("/headers")[0];
      expect(c.method).toBe("PUT");
      expect(JSON.parse(c.body)).toEqual({ hello: "world" });
      expect(c.headers["x-a"]).toBe("b");
      expect(c.headers["content-type"]).toBe("application/json");
      expect(c.headers["webhook-id"]).toBe(j.id);
      expect(c.headers["idempotency-key"]).toBe(`inv-${driver}`);
      expect(Number(c.headers["webhook-timestamp"])).toBeCloseTo(Date.now() / 1000, -2);
      expect(c.headers["scheduler-attempt"]).toBe("1");
      expect(c.headers["scheduler-attempt-id"]).toBe(done.attempt_log[0].attempt_id);
      expect(Number(c.headers["scheduler-fencing-token"])).toBeGreaterThan(0);
      expect(c.headers["scheduler-scheduled-for"]).toBe(j.due_at);
      expect(c.headers["scheduler-nominal-time"]).toBeUndefined();
      // Independent check with the reference implementation of Standard Webhooks.
      expect(() => new Webhook(SECRET).verify(c.body, c.headers)).not.toThrow();
      expect(() => new Webhook(SECRET).verify(`${c.body} `, c.headers)).toThrow();
    });

    test("body_text is sent byte for byte; no body sends nothing", async () => {
      const text = "a=1&b=ü  \n";
      const j1 = await create({ target: { url: `${target.url}/text`, headers: { "content-type": "text/plain" }, body_text: text } });
      const j2 = await create({ target: { url: `${target.url}/empty` } });
      await settled(j1.id, "succeeded");
      await settled(j2.id, "succeeded");
      expect(target.callsTo("/text")[0].body).toBe(text);
      expect(target.callsTo("/text")[0].headers["content-type"]).toBe("text/plain");
      expect(target.callsTo("/empty")[0].body).toBe("");
      // Without an explicit key the job id is the Idempotency-Key.
      expect(target.callsTo("/empty")[0].headers["idempotency-key"]).toBe(j2.id);
    });

    test("transient answers are retried with backoff; every call is one attempt_log entry", async () => {
      target.respond((r, n) => (r.path === "/flaky" && n < 3 ? new Response("no", { status: n === 1 ? 500 : 502 }) : base(r)));
      const j = await create({ target: { url: `${target.url}/flaky` }, retry: { max_attempts: 5, base: "50ms", max: "200ms" } });
      const done = await settled(j.id, "succeeded");
      const calls = target.callsTo("/flaky");
      expect(calls.map((c) => c.headers["scheduler-attempt"])).toEqual(["1", "2", "3"]);
      expect(new Set(calls.map((c) => c.headers["webhook-id"])).size).toBe(1);
      expect(new Set(calls.map((c) => c.headers["scheduler-attempt-id"])).size).toBe(3);
      expect(done.attempt_log.map((a: any) => [a.outcome, a.http_status])).toEqual([
        ["transient", 500],
        ["transient", 502],
        ["success", 200],
      ]);
      expect(done.attempts).toBe(3);
    });

    test("attempts run out → dead, with the last error", async () => {
      target.respond((r) => (r.path === "/down" ? new Response("no", { status: 504 }) : base(r)));
      const j = await create({ target: { url: `${target.url}/down` }, retry: { max_attempts: 2, base: "10ms", max: "20ms" } });
      const done = await settled(j.id, "dead");
      expect(target.callsTo("/down")).toHaveLength(2);
      expect(done.dead_reason).toBe("max_attempts");
      expect(done.last_error).toContain("504");
    });

    test("a permanent answer (404) is dead at once; a redirect is not followed and is permanent", async () => {
      target.respond(base);
      const a = await create({ target: { url: `${target.url}/status/404` } });
      const b = await create({ target: { url: `${target.url}/redirect` } });
      expect((await settled(a.id, "dead")).attempt_log).toHaveLength(1);
      expect((await settled(b.id, "dead")).attempt_log[0].http_status).toBe(302);
      expect(target.callsTo("/ok")).toHaveLength(0);
    });

    test("429 with Retry-After waits at least that long and does not use up max_attempts", async () => {
      target.respond((r, n) => (r.path === "/busy" && n <= 2 ? new Response("slow down", { status: 429, headers: { "retry-after": "1" } }) : base(r)));
      const j = await create({ target: { url: `${target.url}/busy` }, retry: { max_attempts: 1, base: "10ms", max: "10ms" } });
      const done = await settled(j.id, "succeeded", 15_000);
      const calls = target.callsTo("/busy");
      expect(calls).toHaveLength(3);
      expect(calls[1].at - calls[0].at).toBeGreaterThanOrEqual(990);
      expect(calls[2].at - calls[1].at).toBeGreaterThanOrEqual(990);
      expect(calls.map((c) => c.headers["scheduler-attempt"])).toEqual(["1", "2", "3"]);
      expect(done.attempt_log.map((a: any) => a.outcome)).toEqual(["throttled", "throttled", "success"]);
    });

    test("a throttled host slows further calls to it: other jobs wait for its Retry-After", async () => {
      const busy = new Target((r, n) =>
        r.path === "/first" && n === 1 ? new Response("busy", { status: 429, headers: { "retry-after": "2" } }) : new Response("ok"),
      );
      try {
        const first = await create({ target: { url: `${busy.url}/first` }, retry: { max_attempts: 1 } });
        await eventually(() => busy.callsTo("/first").length === 1, 5000, "first call");
        const throttledAt = busy.callsTo("/first")[0].at;
        // The worker has read the 429 (the host's pause is set before the outcome is written):
        // created when the request had only arrived, the second job could be called before
        // the answer was read (83 ms after, in a parallel full run).
        await eventually(async () => (await job(first.id)).attempt_log?.[0]?.outcome === "throttled", 5000, "the 429 recorded");
        const second = await create({ target: { url: `${busy.url}/second` } });
        const done = await settled(second.id, "succeeded", 10_000);
        expect(busy.callsTo("/second")[0].at - throttledAt).toBeGreaterThanOrEqual(1900);
        // Waiting for the host is not an attempt: one call, one attempt.
        expect(done.attempt_log).toHaveLength(1);
        const f = await settled(first.id, "succeeded", 10_000);
        expect(f.attempt_log.map((a: any) => a.outcome)).toEqual(["throttled", "success"]);
      } finally {
        busy.stop();
      }
    });

    test("a timeout is 'unknown' and marked possibly delivered, then retried", async () => {
      target.respond(base);
      const j = await create({ target: { url: `${target.url}/slow` }, timeout: "300ms", retry: { max_attempts: 2, base: "10ms", max: "10ms" } });
      const done = await settled(j.id, "dead", 15_000);
      expect(done.attempt_log.map((a: any) => [a.outcome, a.possibly_delivered])).toEqual([
        ["unknown", true],
        ["unknown", true],
      ]);
    });

    test("a connection refused is transient", async () => {
      const dead = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
      const port = dead.port;
      dead.stop(true);
      const j = await create({ target: { url: `http://127.0.0.1:${port}/gone` }, retry: { max_attempts: 1 } });
      const done = await settled(j.id, "dead");
      expect(done.attempt_log[0]).toMatchObject({ outcome: "transient", possibly_delivered: false });
    });

    test("expires_at before the due time is refused at creation", async () => {
      const r = await api(rt, "POST", "/v1/jobs", {
        target: { url: `${target.url}/never` },
        delay: "300ms",
        expires_at: new Date(Date.now() + 200).toISOString(),
      });
      expect(r.status).toBe(400);
      expect(r.body.error.path).toBe("expires_at");
    });

    test("a due job whose expires_at passed (the scheduler was down) is expired, never called", async () => {
      const j = await create({ target: { url: `${target.url}/outage` }, delay: "1h", expires_at: new Date(Date.now() + 7_200_000).toISOString() });
      // As if the scheduler had been down across both instants.
      await t.db.query("UPDATE jobs SET due_at = now() - interval '2 s', expires_at = now() - interval '1 s' WHERE id = $1", [j.id]);
      const done = await settled(j.id, "expired", 5000);
      expect(done.finished_at).not.toBeNull();
      expect(done.attempt_log).toHaveLength(0);
      expect(target.callsTo("/outage")).toHaveLength(0);
    });

    test("a throttled job whose next try would fall after expires_at ends expired, not called again", async () => {
      target.respond((r) => (r.path === "/throttle-exp" ? new Response("no", { status: 503, headers: { "retry-after": "5" } }) : base(r)));
      const j = await create({ target: { url: `${target.url}/throttle-exp` }, expires_at: new Date(Date.now() + 2000).toISOString() });
      const done = await settled(j.id, "expired", 5000);
      expect(target.callsTo("/throttle-exp")).toHaveLength(1);
      expect(done.attempt_log[0].outcome).toBe("throttled");
      target.respond(base);
    });

    test("metrics count deliveries by outcome and record scheduling lag", async () => {
      const text = await (await fetch(`${rt.url}/metrics`)).text();
      expect(text).toMatch(/scheduler_deliveries_total\{outcome="success"\} [1-9]/);
      expect(text).toMatch(/scheduler_deliveries_total\{outcome="transient"\} [1-9]/);
      expect(text).toMatch(/scheduler_scheduling_lag_seconds_count [1-9]/);
      expect(text).toMatch(/scheduler_end_to_end_seconds_count [1-9]/);
      expect(text).toMatch(/scheduler_start_lag_seconds_count [1-9]/);
      expect(text).toMatch(/scheduler_queue_wait_seconds_count [1-9]/);
      expect(text).toMatch(/scheduler_jobs\{status="succeeded"\} [1-9]/);
    });
  });
}

for (const driver of DRIVERS) {
  describe(`private targets are refused at delivery too (${driver})`, () => {
    test("a job whose target is loopback (it got in before the rule, or by a direct insert) ends dead, never called", async () => {
      const t = await freshDb(driver);
      const target = new Target();
      const rt = await startScheduler(t.db, { SCHEDULER_ALLOW_PRIVATE_TARGETS: "0" });
      try {
        const job = await insertJob(t.db, { target: { url: `${target.url}/private`, method: "POST", headers: {}, body: null, json: false } });
        await t.db.query("SELECT pg_notify('scheduler_due', '0')");
        const done = await eventually(
          async () => {
            const j = (await api(rt, "GET", `/v1/jobs/${job.id}`)).body;
            return j.status === "dead" ? j : undefined;
          },
          5000,
          "dead",
        );
        expect(done.dead_reason).toBe("target_refused");
        expect(done.last_error).toContain("SCHEDULER_ALLOW_PRIVATE_TARGETS");
        expect(target.calls).toHaveLength(0);
      } finally {
        await rt.stop();
        await t.close();
        target.stop();
      }
    });
  });
}
