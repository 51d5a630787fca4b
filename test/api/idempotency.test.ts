import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tokenSpec } from "../helpers/tokens.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import { bearer, expectError, HOOK } from "./support.ts";

const A = bearer("tokA");
const B = bearer("tokB");

for (const driver of DRIVERS) {
  describe(`idempotency (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: tokenSpec("tokA:acme:jobs:read,jobs:write;tokB:beta:jobs:write,jobs:read") }, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });

    const post = (body: unknown, h = A) => api(rt, "POST", "/v1/jobs", body, h);
    const rowsWithKey = async (tenant: string, key: string) =>
      Number((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE tenant=$1 AND idempotency_key=$2", [tenant, key]))[0].n);

    test("same key, same request → 200 with the first job, unchanged", async () => {
      const body = { target: { url: HOOK, body: { invoice: 42 } }, run_at: "2030-01-01T00:00:00Z", idempotency_key: "invoice-42" };
      const first = await post(body);
      expect(first.status).toBe(201);
      const again = await post(body);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      expect(await rowsWithKey("acme", "invoice-42")).toBe(1);
    });

    test('a repeated "delay" is the same request: same job, first due time kept', async () => {
      const body = { target: { url: HOOK }, delay: "30s", idempotency_key: "delay-30s" };
      const first = await post(body);
      expect(first.status).toBe(201);
      await Bun.sleep(20);
      const again = await post(body);
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.body.id);
      expect(again.body.due_at).toBe(first.body.due_at);
      expect(again.body.version).toBe(1);
    });

    test("compared after parsing: key order and whitespace do not matter", async () => {
      const first = await post({ idempotency_key: "order-1", target: { url: HOOK, method: "PUT", body: { a: 1, b: [1, 2] } }, priority: 3 });
      expect(first.status).toBe(201);
      const raw = `{ "priority": 3,\n  "target": { "body": { "b": [1,2], "a": 1 }, "method": "PUT", "url": "${HOOK}" },\n  "idempotency_key": "order-1" }`;
      const again = await post(raw);
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(first.body.id);
    });

    test("same key, different request → 409, and the first job is untouched", async () => {
      const first = await post({ target: { url: HOOK, body: { n: 1 } }, idempotency_key: "diff-1", delay: "1h" });
      expect(first.status).toBe(201);
      for (const other of [
        { target: { url: HOOK, body: { n: 2 } }, idempotency_key: "diff-1", delay: "1h" },
        { target: { url: HOOK, body: { n: 1 } }, idempotency_key: "diff-1", delay: "2h" },
        { target: { url: HOOK, body: { n: 1 } }, idempotency_key: "diff-1" },
        { target: { url: `${HOOK}/other`, body: { n: 1 } }, idempotency_key: "diff-1", delay: "1h" },
      ]) {
        const r = await post(other);
        expectError(r, 409);
      }
      const g = await api(rt, "GET", `/v1/jobs/${first.body.id}`, undefined, A);
      expect(g.body).toMatchObject({ version: 1, due_at: first.body.due_at, target: { url: HOOK, body: { n: 1 } } });
      expect(await rowsWithKey("acme", "diff-1")).toBe(1);
    });

    test("the same key in another tenant is independent", async () => {
      const body = { target: { url: HOOK }, idempotency_key: "shared-key", delay: "1m" };
      const a = await post(body, A);
      const b = await post(body, B);
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.body.id).not.toBe(a.body.id);
      expect(a.body.tenant).toBe("acme");
      expect(b.body.tenant).toBe("beta");
      // A different request under the key in beta does not conflict with acme's.
      expect((await post({ ...body, delay: "9m", idempotency_key: "only-in-acme" }, A)).status).toBe(201);
      expect((await post({ ...body, delay: "1m", idempotency_key: "only-in-acme" }, B)).status).toBe(201);
      // And a repeat in each tenant finds that tenant's own job.
      expect((await post(body, A)).body.id).toBe(a.body.id);
      expect((await post(body, B)).body.id).toBe(b.body.id);
    });

    test("20 concurrent identical creates → exactly one 201, the rest 200, one job", async () => {
      const body = { target: { url: HOOK, body: { race: true } }, idempotency_key: "race-20", delay: "10m" };
      const results = await Promise.all(Array.from({ length: 20 }, () => post(body)));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(19);
      const ids = new Set(results.map((r) => r.body.id));
      expect(ids.size).toBe(1);
      const list = await api(rt, "GET", "/v1/jobs?limit=1000", undefined, A);
      expect(list.status).toBe(200);
      expect(list.body.next_cursor).toBeNull();
      const withKey = (list.body.items as any[]).filter((j) => j.idempotency_key === "race-20");
      expect(withKey).toHaveLength(1);
      expect(withKey[0].id).toBe([...ids][0]);
      expect(await rowsWithKey("acme", "race-20")).toBe(1);
    });

    test("concurrent creates with one key but different bodies → one 201, the rest 409", async () => {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => post({ target: { url: HOOK, body: { i } }, idempotency_key: "race-diff" })));
      expect(results.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of results.filter((r) => r.status !== 201)) expectError(r, 409);
      expect(await rowsWithKey("acme", "race-diff")).toBe(1);
    });

    test("in a batch: a key repeated within the batch or from before finds the first job", async () => {
      const earlier = await post({ target: { url: HOOK }, idempotency_key: "batch-earlier" });
      expect(earlier.status).toBe(201);
      const r = await api(
        rt,
        "POST",
        "/v1/jobs/batch",
        {
          jobs: [
            { target: { url: HOOK }, idempotency_key: "batch-twin" },
            { target: { url: HOOK }, idempotency_key: "batch-twin" },
            { target: { url: HOOK }, idempotency_key: "batch-earlier" },
            { target: { url: HOOK, body: { other: 1 } }, idempotency_key: "batch-earlier" },
            { target: { url: HOOK, body: { other: 1 } }, idempotency_key: "batch-twin" },
          ],
        },
        A,
      );
      expect(r.status).toBe(200);
      const [t1, t2, e1, conflict1, conflict2] = r.body.jobs;
      expect(t1.id).toBeString();
      expect(t2.id).toBe(t1.id);
      expect(e1.id).toBe(earlier.body.id);
      expectError({ status: 200, body: conflict1 }, 200);
      expectError({ status: 200, body: conflict2 }, 200);
      expect(conflict1.error.code).toBe(conflict2.error.code);
      expect(await rowsWithKey("acme", "batch-twin")).toBe(1);
      expect(await rowsWithKey("acme", "batch-earlier")).toBe(1);
    });
  });
}
