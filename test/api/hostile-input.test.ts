// Input that PostgreSQL rejects (or that costs the process dearly) must be a 400 naming the
// field, never a 500: NUL, unpaired surrogates, a cursor past 2^63 - 1, JSON nested 200 000
// deep, instants outside 1970..9999, header values fetch would refuse. Both drivers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";

const HOOK = "https://hooks.example.com/x";
const job = (over: Record<string, unknown> = {}, target: Record<string, unknown> = {}) => ({ target: { url: HOOK, ...target }, delay: "1h", ...over });
const LONE_HIGH = "\uD800";
const LONE_LOW = "x\uDC00y";

for (const driver of DRIVERS) {
  describe(`hostile input is a 400 with the field (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, {}, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });
    // JSON.stringify writes lone surrogates as \\u escapes: the server sees them as sent.
    const expect400 = async (method: string, path: string, body: unknown, field: string) => {
      const r = await api(rt, method, path, body);
      expect({ path, field, status: r.status }).toEqual({ path, field, status: 400 });
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.path).toBe(field);
      return r;
    };

    test("NUL in any string: body_text, body, idempotency_key, header value, reason, keys", async () => {
      await expect400("POST", "/v1/jobs", job({}, { body_text: "a\u0000b" }), "target.body_text");
      await expect400("POST", "/v1/jobs", job({}, { body: { note: "a\u0000b" } }), "target.body.note");
      await expect400("POST", "/v1/jobs", job({ idempotency_key: "k\u0000" }), "idempotency_key");
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-a": "\u0000" } }), "target.headers.x-a");
      await expect400("POST", "/v1/jobs", job({}, { body: { "k\u0000": 1 } }), "target.body.(key)");
      await expect400("POST", "/v1/jobs/batch", { jobs: [job(), job({}, { body_text: "\u0000" })] }, "jobs.1.target.body_text");
      const created = await api(rt, "POST", "/v1/jobs", job());
      expect(created.status).toBe(201);
      await expect400("POST", `/v1/jobs/${created.body.id}/cancel`, { reason: "why\u0000" }, "reason");
      await expect400("POST", "/v1/schedules", { id: "s\u0000", cron: "0 9 * * *", target: { url: HOOK } }, "id");
    });

    test("unpaired surrogates, high or low, anywhere", async () => {
      await expect400("POST", "/v1/jobs", job({}, { body_text: LONE_HIGH }), "target.body_text");
      await expect400("POST", "/v1/jobs", job({}, { body: [1, LONE_LOW] }), "target.body.1");
      await expect400("POST", "/v1/jobs", job({ idempotency_key: LONE_LOW }), "idempotency_key");
      // A pair is fine: that is just an emoji.
      expect((await api(rt, "POST", "/v1/jobs", job({}, { body_text: "ok \uD83D\uDE00" }))).status).toBe(201);
    });

    test("NUL in a query parameter or the path", async () => {
      for (const [path, field] of [
        ["/v1/jobs?schedule_id=%00", "schedule_id"],
        ["/v1/jobs?tenant=a%00", "tenant"],
        ["/v1/audit?object_id=%00", "object_id"],
        ["/v1/audit?action=dlq.%00", "action"],
        ["/v1/schedules/x%00y", "path"],
      ] as const) {
        await expect400("GET", path, undefined, field);
      }
      const cursor = Buffer.from(JSON.stringify(["t\u0000", "id"])).toString("base64url");
      await expect400("GET", `/v1/schedules?cursor=${cursor}`, undefined, "cursor");
    });

    test("an audit cursor past 2^63 - 1", async () => {
      for (const n of ["9223372036854775808", "9999999999999999999"]) {
        await expect400("GET", `/v1/audit?cursor=${Buffer.from(n).toString("base64url")}`, undefined, "cursor");
      }
      expect((await api(rt, "GET", `/v1/audit?cursor=${Buffer.from("9223372036854775807").toString("base64url")}`)).status).toBe(200);
    });

    test("JSON nested 200 000 deep is refused on its depth, before parsing", async () => {
      const deep = `{"target":{"url":"${HOOK}","body":${"[".repeat(200_000)}${"]".repeat(200_000)}}}`;
      const r = await expect400("POST", "/v1/jobs", deep, "body");
      expect(r.body.error.message).toContain("deeper than 64");
      // Deep but within the limit is a job.
      const ok = `{"target":{"url":"${HOOK}","body":${"[".repeat(60)}${"]".repeat(60)}},"delay":"1h"}`;
      expect((await api(rt, "POST", "/v1/jobs", ok)).status).toBe(201);
      // Brackets inside strings do not count.
      expect((await api(rt, "POST", "/v1/jobs", job({}, { body_text: "[".repeat(1000) }))).status).toBe(201);
    });

    test("instants outside 1970..9999: run_at, expires_at, schedule bounds, list filters", async () => {
      await expect400("POST", "/v1/jobs", { target: { url: HOOK }, run_at: "0001-01-01T00:00:00Z" }, "run_at");
      await expect400("POST", "/v1/jobs", { target: { url: HOOK }, run_at: "1969-12-31T23:59:59Z" }, "run_at");
      await expect400("POST", "/v1/jobs", job({ expires_at: "0099-01-01T00:00:00Z" }), "expires_at");
      await expect400("GET", "/v1/jobs?due_before=0001-01-01T00:00:00Z", undefined, "due_before");
      await expect400("POST", "/v1/schedules", { id: "s-early", cron: "0 9 * * *", target: { url: HOOK }, start_at: "0001-01-01T00:00:00Z" }, "start_at");
      const far = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, run_at: "9999-12-31T23:59:59Z" });
      expect(far.status).toBe(201);
      expect(far.body.run_at ?? far.body.scheduled_for ?? far.body.due_at).toStartWith("9999-12-31T23:59:59");
    });

    test("header values fetch would refuse, oversized values, reserved names: 400 at creation", async () => {
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-name": "Zoë" } }), "target.headers.x-name");
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-emoji": "\uD83D\uDE00" } }), "target.headers.x-emoji");
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-ctl": "a\u0001b" } }), "target.headers.x-ctl");
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-del": "a\u007fb" } }), "target.headers.x-del");
      await expect400("POST", "/v1/jobs", job({}, { headers: { "x-big": "a".repeat(8193) } }), "target.headers.x-big");
      for (const name of ["Proxy-Authorization", "proxy-connection", "Expect"]) {
        await expect400("POST", "/v1/jobs", job({}, { headers: { [name]: "x" } }), `target.headers.${name}`);
      }
      const ok = await api(rt, "POST", "/v1/jobs", job({}, { headers: { "x-ok": `Bearer abc\tdef ${"a".repeat(8000)}` } }));
      expect(ok.status).toBe(201);
    });
  });
}
