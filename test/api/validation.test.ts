import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import { expectError, HOOK } from "./support.ts";

/** A marker placed in each invalid payload: no error may carry it back. */
const SECRET = "sk_live_9f8e7d6c5b4a";
const withSecret = (target: Record<string, unknown> = {}) => ({ url: HOOK, headers: { "x-api-key": SECRET }, body: { card: SECRET }, ...target });

// [name, request body, expected error.path (string: exact, RegExp: pattern, null: any)]
const INVALID: [string, unknown, string | RegExp | null][] = [
  ["missing target", { delay: "1s", idempotency_key: SECRET }, "target"],
  ["target not an object", { target: SECRET }, "target"],
  ["missing target.url", { target: { method: "POST", body: SECRET } }, "target.url"],
  ["ftp url", { target: withSecret({ url: "ftp://x" }) }, "target.url"],
  ["not a url", { target: withSecret({ url: "not a url" }) }, "target.url"],
  ["credentials in the url", { target: withSecret({ url: `https://user:${SECRET}@example.com/hook` }) }, "target.url"],
  ["bad method", { target: withSecret({ method: "FETCH" }) }, "target.method"],
  ["idempotency_key in a schedule occurrence's form", { target: withSecret(), idempotency_key: "daily-report@2027-01-04T14:00:00.000Z" }, "idempotency_key"],
  ["GET with a body (the signature would cover bytes never sent)", { target: withSecret({ method: "GET" }) }, "target.body"],
  ["HEAD with body_text", { target: { url: HOOK, method: "HEAD", body_text: SECRET } }, "target.body_text"],
  ["method not a string", { target: withSecret({ method: 5 }) }, "target.method"],
  ["reserved header webhook-id", { target: withSecret({ headers: { "webhook-id": SECRET } }) }, /^target\.headers/],
  ["reserved header Scheduler-Attempt", { target: withSecret({ headers: { "Scheduler-Attempt": "9" } }) }, /^target\.headers/],
  ["reserved header Idempotency-Key", { target: withSecret({ headers: { "Idempotency-Key": SECRET } }) }, /^target\.headers/],
  ["reserved header host", { target: withSecret({ headers: { Host: "internal" } }) }, /^target\.headers/],
  ["header value with a line break", { target: withSecret({ headers: { "x-a": `b\r\nx-injected: ${SECRET}` } }) }, /^target\.headers/],
  ["header value not a string", { target: withSecret({ headers: { "x-a": 5 } }) }, /^target\.headers/],
  ["run_at without offset", { target: withSecret(), run_at: "2026-12-01T09:00:00" }, "run_at"],
  ["run_at not an instant", { target: withSecret(), run_at: SECRET }, "run_at"],
  ["run_at February 30", { target: withSecret(), run_at: "2027-02-30T09:00:00Z" }, "run_at"],
  ["run_at 24:00", { target: withSecret(), run_at: "2027-03-01T24:00:00Z" }, "run_at"],
  ["delay -5s", { target: withSecret(), delay: "-5s" }, "delay"],
  ["delay abc", { target: withSecret(), delay: "abc" }, "delay"],
  ["delay echoing", { target: withSecret(), delay: SECRET }, "delay"],
  ["delay negative number", { target: withSecret(), delay: -5 }, "delay"],
  ["delay fractional ms", { target: withSecret(), delay: 1.5 }, "delay"],
  ["run_at and delay", { target: withSecret(), run_at: "2030-01-01T00:00:00Z", delay: "5s" }, null],
  ["priority 1.5", { target: withSecret(), priority: 1.5 }, "priority"],
  ["priority a string", { target: withSecret(), priority: "high" }, "priority"],
  ["retry.max_attempts 0", { target: withSecret(), retry: { max_attempts: 0 } }, "retry.max_attempts"],
  ["retry.base bad", { target: withSecret(), retry: { base: "fast" } }, "retry.base"],
  ["retry.max below retry.base", { target: withSecret(), retry: { base: "1h", max: "1s" } }, "retry.max"],
  ["timeout over an hour", { target: withSecret(), timeout: "2h" }, "timeout"],
  ["window bad", { target: withSecret(), window: "soon" }, "window"],
  ["unknown top-level field", { target: withSecret(), colour: SECRET }, "colour"],
  ["unknown target field", { target: withSecret({ bodyy: 1 }) }, "target.bodyy"],
  ["expires_at before due", { target: withSecret(), delay: "1h", expires_at: "2020-01-01T00:00:00Z" }, "expires_at"],
  ["expires_at before run_at", { target: withSecret(), run_at: "2031-01-01T00:00:00Z", expires_at: "2030-12-31T23:59:59Z" }, "expires_at"],
  ["body and body_text", { target: withSecret({ body_text: SECRET }) }, /^target/],
  ["body_text not a string", { target: { url: HOOK, body_text: { a: SECRET } } }, "target.body_text"],
  ["idempotency_key empty", { target: withSecret(), idempotency_key: "" }, "idempotency_key"],
  ["tenant with spaces", { target: withSecret(), tenant: "a b" }, "tenant"],
];

for (const driver of DRIVERS) {
  describe(`job validation (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    let small: Runtime;
    let guarded: Runtime;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, {}, { mode: "api" });
      small = await startScheduler(tdb.db, { SCHEDULER_MAX_BODY_BYTES: "2048" }, { mode: "api" });
      guarded = await startScheduler(tdb.db, { SCHEDULER_ALLOW_PRIVATE_TARGETS: "0" }, { mode: "api" });
    });
    afterAll(async () => {
      await Promise.all([rt?.stop(), small?.stop(), guarded?.stop()]);
      await tdb?.close();
    });

    const jobCount = async () => Number((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n);

    test("each invalid job → 400 naming the field, nothing created, input not echoed", async () => {
      const n0 = await jobCount();
      for (const [name, body, path] of INVALID) {
        const r = await api(rt, "POST", "/v1/jobs", body);
        let err;
        try {
          err = expectError(r, 400, path ?? undefined);
        } catch (e) {
          throw new Error(`${name}: ${(e as Error).message}\n${JSON.stringify(r.body)}`);
        }
        if (JSON.stringify(r.body).includes(SECRET)) throw new Error(`${name}: the error echoes the input: ${JSON.stringify(r.body)}`);
        // The message names the field too, so a human can act on it without the path.
        if (typeof path === "string") expect(err.message).toContain(path.split(".").pop()!);
      }
      expect(await jobCount()).toBe(n0);
    });

    test("the same rules inside a batch, with the item's index in the path", async () => {
      const r = await api(rt, "POST", "/v1/jobs/batch", { jobs: INVALID.map(([, body]) => body) });
      expect(r.status).toBe(200);
      expect(r.body.jobs).toHaveLength(INVALID.length);
      r.body.jobs.forEach((item: any, i: number) => {
        const [name, , path] = INVALID[i];
        try {
          expectError({ status: 200, body: item }, 200, typeof path === "string" ? `jobs.${i}.${path}` : new RegExp(`^jobs\\.${i}\\.`));
        } catch (e) {
          throw new Error(`${name}: ${(e as Error).message}\n${JSON.stringify(item)}`);
        }
      });
      expect(JSON.stringify(r.body)).not.toContain(SECRET);
    });

    test("a request that is not a JSON object → 400", async () => {
      for (const raw of [
        "{not json",
        '{"target": {"url": "https://example.com/hook"}',
        "[]",
        "null",
        '"a string"',
        "42",
        "true",
        `[{"target":{"url":"${HOOK}"}}]`,
      ]) {
        const r = await api(rt, "POST", "/v1/jobs", raw);
        try {
          expectError(r, 400);
        } catch (e) {
          throw new Error(`${raw}: ${(e as Error).message}`);
        }
        expect(JSON.stringify(r.body)).not.toContain("example.com");
      }
    });

    test("valid edge values are accepted (the rules above are not over-eager)", async () => {
      for (const body of [
        { target: { url: HOOK, method: "patch", headers: { "X-Custom": "v" } }, delay: 0 },
        { target: { url: "http://example.com:8080/p?q=1#f", body: [1, "two"] }, delay: "250ms", priority: -1000 },
        { target: { url: HOOK, body: null }, run_at: "2030-02-28T23:59:59.999+05:30", expires_at: "2030-03-01T00:00:00Z" },
        { target: { url: HOOK, body_text: "" }, retry: { max_attempts: 1, base: "1s", max: "1s" }, timeout: "1h", window: "1d" },
        { target: { url: HOOK }, run_at: "2028-02-29T00:00:00Z" },
      ]) {
        const r = await api(rt, "POST", "/v1/jobs", body);
        if (r.status !== 201) throw new Error(`${JSON.stringify(body)} → ${r.status} ${JSON.stringify(r.body)}`);
      }
    });

    test("request bodies over SCHEDULER_MAX_BODY_BYTES → 413 with the error shape", async () => {
      const big = { target: { url: HOOK, body_text: "x".repeat(4096) } };
      const r = await api(small, "POST", "/v1/jobs", big);
      const err = expectError(r, 413);
      expect(JSON.stringify(err)).not.toContain("xxxxxxxx");
      expectError(await api(small, "POST", "/v1/jobs/batch", { jobs: [big] }), 413);
      // Just under the limit is fine, and the default limit takes 4 KB.
      expect((await api(small, "POST", "/v1/jobs", { target: { url: HOOK, body_text: "x".repeat(1500) } })).status).toBe(201);
      expect((await api(rt, "POST", "/v1/jobs", big)).status).toBe(201);
    });

    test("private targets are refused at creation without SCHEDULER_ALLOW_PRIVATE_TARGETS", async () => {
      const n0 = await jobCount();
      const refused = [
        "http://127.0.0.1:9/x",
        "http://localhost/x",
        "http://LOCALHOST./x",
        "http://api.localhost/x",
        "http://169.254.169.254/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://172.16.0.5/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fd00:ec2::254]/",
        "http://0x7f000001/",
        "http://2130706433/",
        "http://metadata.google.internal/",
      ];
      for (const url of refused) {
        const r = await api(guarded, "POST", "/v1/jobs", { target: { url } });
        try {
          const err = expectError(r, 400, "target.url");
          expect(err.code).toBe("target_refused");
        } catch (e) {
          throw new Error(`${url}: ${(e as Error).message} ${JSON.stringify(r.body)}`);
        }
      }
      const b = await api(guarded, "POST", "/v1/jobs/batch", { jobs: [{ target: { url: HOOK } }, { target: { url: "http://127.0.0.1:9/x" } }] });
      expect(b.status).toBe(200);
      expect(b.body.jobs[0].status).toBe("scheduled");
      expect(expectError({ status: 200, body: b.body.jobs[1] }, 200, "jobs.1.target.url").code).toBe("target_refused");
      expect(await jobCount()).toBe(n0 + 1);
      // Public addresses pass; a name that does not resolve yet is not refused.
      expect((await api(guarded, "POST", "/v1/jobs", { target: { url: "http://93.184.215.14/x" } })).status).toBe(201);
      expect((await api(guarded, "POST", "/v1/jobs", { target: { url: HOOK } })).status).toBe(201);
      // The setting is what allows them.
      expect((await api(rt, "POST", "/v1/jobs", { target: { url: "http://127.0.0.1:9/x" } })).status).toBe(201);
    });
  });
}
