import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { scrape } from "../helpers/metrics.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

for (const driver of DRIVERS) {
  describe(`verify before retry (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    // /hook/<case>: the first call outlives the job's timeout (its outcome is unknown), later
    // ones answer at once. /verify/<case>: answers as the case says.
    const verifyAnswers: Record<string, () => Response | Promise<Response>> = {
      yes: () => Response.json({ processed: true, at: "2026-12-01T00:00:00Z" }),
      no: () => Response.json({ processed: false }),
      missing: () => new Response("no such id", { status: 404 }),
      broken: () => new Response("oops", { status: 500 }),
      slow: () => Bun.sleep(3000).then(() => Response.json({ processed: true })),
      odd: () => Response.json({ done: true }),
      plain: () => Response.json({ processed: true }),
      sched: () => Response.json({ processed: true }),
      // No usable answer at first; processed when asked again.
      later: () => (target.callsTo("/verify/later").length === 1 ? new Response("down", { status: 503 }) : Response.json({ processed: true })),
    };
    const target = new Target((r: Received, n: number) => {
      const [, kind, name] = r.path.split("/");
      if (kind === "verify") return verifyAnswers[name]();
      if (name === "fail500" && n === 1) return new Response("x", { status: 500 });
      if (name === "later" && n === 2) return new Response("x", { status: 500 });
      if (n === 1 && name !== "fail500") return Bun.sleep(1500).then(() => new Response("late"));
      return new Response("ok");
    });

    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_SIGNING_SECRET: SECRET });
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
      target.stop();
    });

    const job = async (id: string) => (await api(rt, "GET", `/v1/jobs/${id}`)).body;
    const settled = (id: string, status: string, ms = 15_000) =>
      eventually(
        async () => {
          const j = await job(id);
          return j.status === status ? j : undefined;
        },
        ms,
        `job ${id} to be ${status}`,
      );
    const create = async (name: string, over: Record<string, unknown> = {}) => {
      const r = await api(rt, "POST", "/v1/jobs", {
        target: { url: `${target.url}/hook/${name}`, body: { n: name } },
        timeout: "300ms",
        retry: { base: "50ms", max: "100ms", max_attempts: 5 },
        verify: { url: `${target.url}/verify/${name}` },
        ...over,
      });
      expect(r.status).toBe(201);
      return r.body;
    };

    test("a timed-out call that the target processed: succeeded after one call, the attempt verified, the verify GET signed", async () => {
      const before = await scrape(rt.url!);
      const j = await create("yes", { idempotency_key: `verify-yes-${driver}` });
      expect(j.verify).toEqual({ url: `${target.url}/verify/yes` });
      const done = await settled(j.id, "succeeded");
      expect(target.callsTo("/hook/yes")).toHaveLength(1);
      const asks = target.callsTo("/verify/yes");
      expect(asks).toHaveLength(1);
      const ask = asks[0];
      expect(ask.method).toBe("GET");
      expect(ask.headers["webhook-id"]).toBe(j.id);
      expect(ask.headers["idempotency-key"]).toBe(`verify-yes-${driver}`);
      // Signed over an empty body, checked with the reference implementation.
      expect(() => new Webhook(SECRET).verify("", ask.headers)).not.toThrow();
      expect(() => new Webhook(SECRET).verify("x", ask.headers)).toThrow();
      expect(done.attempts).toBe(1);
      expect(done.attempt_log).toHaveLength(1);
      expect(done.attempt_log[0]).toMatchObject({ outcome: "unknown", possibly_delivered: true, verified: true });
      const after = await scrape(rt.url!);
      const delta = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
      expect(delta('scheduler_verify_checks_total{result="processed"}')).toBe(1);
      expect(delta("scheduler_verify_avoided_calls_total")).toBe(1);
    });

    for (const [name, result] of [
      ["no", "not_processed"],
      ["missing", "not_processed"],
      ["broken", "error"],
      ["odd", "error"],
      ["slow", "error"],
    ] as const) {
      test(`verify answer "${name}": the retry goes ahead as usual (${result})`, async () => {
        const before = await scrape(rt.url!);
        const j = await create(name);
        const done = await settled(j.id, "succeeded", 20_000);
        expect(target.callsTo(`/hook/${name}`)).toHaveLength(2);
        expect(target.callsTo(`/verify/${name}`)).toHaveLength(1);
        expect(done.attempt_log.map((a: { verified: boolean }) => a.verified)).toEqual([false, false]);
        expect(done.attempt_log[0].possibly_delivered).toBe(true);
        const after = await scrape(rt.url!);
        expect(
          (after.get(`scheduler_verify_checks_total{result="${result}"}`) ?? 0) - (before.get(`scheduler_verify_checks_total{result="${result}"}`) ?? 0),
        ).toBe(1);
      }, 30_000);
    }

    test("a call in doubt followed by an answered failure: the next retry asks about the call in doubt, and it is the one verified", async () => {
      const j = await create("later");
      const done = await settled(j.id, "succeeded", 20_000);
      expect(target.callsTo("/hook/later")).toHaveLength(2);
      expect(target.callsTo("/verify/later")).toHaveLength(2);
      expect(done.attempt_log.map((a: { outcome: string; verified: boolean }) => [a.outcome, a.verified])).toEqual([
        ["unknown", true],
        ["transient", false],
      ]);
    }, 30_000);

    test("a failure that is not in doubt (500) is retried without asking", async () => {
      const j = await create("fail500");
      const done = await settled(j.id, "succeeded");
      expect(done.attempts).toBe(2);
      expect(target.callsTo("/verify/fail500")).toHaveLength(0);
    });

    test("a job without verify is retried after a timeout without any question", async () => {
      const j = await create("plain", { verify: undefined });
      expect(j.verify).toBeNull();
      const done = await settled(j.id, "succeeded");
      expect(done.attempts).toBe(2);
      expect(target.callsTo("/verify/plain")).toHaveLength(0);
    });

    test("a schedule's verify URL reaches its occurrences", async () => {
      const s = await api(rt, "POST", "/v1/schedules", {
        id: `verify-${driver}`,
        cron: "0 0 1 1 *",
        target: { url: `${target.url}/hook/sched` },
        timeout: "300ms",
        retry: { base: "50ms", max: "100ms" },
        verify: { url: `${target.url}/verify/sched` },
      });
      expect(s.status).toBe(201);
      expect(s.body.verify).toEqual({ url: `${target.url}/verify/sched` });
      const trig = await api(rt, "POST", `/v1/schedules/verify-${driver}/trigger`, {});
      expect(trig.status).toBe(201);
      const done = await settled(trig.body.id, "succeeded");
      expect(done.attempt_log[0].verified).toBe(true);
      expect(target.callsTo("/hook/sched")).toHaveLength(1);
      const off = await api(rt, "PATCH", `/v1/schedules/verify-${driver}`, { verify: null });
      expect(off.status).toBe(200);
      expect(off.body.verify).toBeNull();
    });

    test("verify.url is validated like a target url (400 naming verify.url)", async () => {
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/hook/x` }, verify: { url: "not a url" } });
      expect(r.status).toBe(400);
      expect(r.body.error.path).toBe("verify.url");
      const r2 = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/hook/x` }, verify: { url: `${target.url}/v`, extra: 1 } });
      expect(r2.status).toBe(400);
      expect(r2.body.error.path).toBe("verify.extra");
    });
  });
}

describe("verify before retry: private verify URLs", () => {
  test("a verify URL on loopback is refused at creation when private targets are not allowed", async () => {
    const t = await freshDb("pglite");
    const rt = await startScheduler(t.db, { SCHEDULER_ALLOW_PRIVATE_TARGETS: "0" });
    try {
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: "https://93.184.215.14/hook" }, verify: { url: "http://127.0.0.1:9/verify" } });
      expect(r.status).toBe(400);
      expect(r.body.error.path).toBe("verify.url");
    } finally {
      await rt.stop();
      await t.close();
    }
  });
});
