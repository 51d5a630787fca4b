import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tok, tokenSpec } from "../helpers/tokens.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import { bearer, expectError, HOOK, mustCreate } from "./support.ts";

const TOKENS = tokenSpec("tokA:acme:jobs:read,jobs:write;tokR:acme:jobs:read;tokB:beta:jobs:write,jobs:read;tokAll:*:admin");
const A = bearer("tokA");
const R = bearer("tokR");
const B = bearer("tokB");
const ALL = bearer("tokAll");

for (const driver of DRIVERS) {
  describe(`auth and tenancy (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    let open: Runtime;
    let standby: Runtime;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      // Many bad tokens from one client on purpose: the failed-attempt limit is tested in auth-limit.test.ts.
      rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS, REGION: "iad", HOME_REGION: "iad", SCHEDULER_AUTH_FAILURE_LIMIT: "0" }, { mode: "api" });
      open = await startScheduler(tdb.db, { REGION: "iad" }, { mode: "api" });
      standby = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS, REGION: "ams", HOME_REGION: "iad" }, { mode: "api" });
    });
    afterAll(async () => {
      await Promise.all([rt?.stop(), open?.stop(), standby?.stop()]);
      await tdb?.close();
    });

    const jobCount = async () => Number((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n);
    const listIds = async (h: Record<string, string>, q = "") => {
      const r = await api(rt, "GET", `/v1/jobs?limit=1000${q}`, undefined, h);
      expect(r.status).toBe(200);
      return new Set((r.body.items as any[]).map((j) => j.id));
    };

    test("no token or a bad token → 401 on every /v1 route", async () => {
      const id = Bun.randomUUIDv7();
      const routes: [string, string, unknown?][] = [
        ["GET", "/v1/jobs"],
        ["GET", `/v1/jobs/${id}`],
        ["POST", "/v1/jobs", { target: { url: HOOK } }],
        ["POST", "/v1/jobs/batch", { jobs: [] }],
        ["POST", `/v1/jobs/${id}/cancel`, {}],
        ["PATCH", `/v1/jobs/${id}`, { delay: "1s" }],
      ];
      const n0 = await jobCount();
      for (const [method, path, body] of routes) {
        for (const h of [
          {},
          bearer("nope"),
          bearer("tokA2"),
          bearer("tok"),
          { authorization: tok("tokA") },
          { authorization: "Basic dG9rQTo=" },
          { authorization: "Bearer " },
        ]) {
          const r = await api(rt, method, path, body, h);
          try {
            expectError(r, 401);
          } catch (e) {
            throw new Error(`${method} ${path} with ${JSON.stringify(h)}: ${(e as Error).message}`);
          }
        }
      }
      expect(await jobCount()).toBe(n0);
      expect((await api(rt, "GET", "/v1/jobs", undefined, A)).status).toBe(200);
      expect((await api(rt, "GET", "/v1/jobs", undefined, { authorization: `bearer ${tok("tokA")}` })).status).toBe(200);
    });

    test("a read-only token may read but not write → 403", async () => {
      const n0 = await jobCount();
      expectError(await api(rt, "POST", "/v1/jobs", { target: { url: HOOK } }, R), 403);
      expectError(await api(rt, "POST", "/v1/jobs/batch", { jobs: [{ target: { url: HOOK } }] }, R), 403);
      expect(await jobCount()).toBe(n0);
      const j = await mustCreate(rt, { delay: "1h" }, A);
      expect((await api(rt, "GET", `/v1/jobs/${j.id}`, undefined, R)).status).toBe(200);
      expect(await listIds(R)).toContain(j.id);
      expectError(await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {}, R), 403);
      expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { delay: "2h" }, R), 403);
      expect((await api(rt, "GET", `/v1/jobs/${j.id}`, undefined, A)).body).toMatchObject({ status: "scheduled", version: 1 });
    });

    test("tenant isolation: another tenant's job is 403/404 and not listed; * sees both", async () => {
      const a = await mustCreate(rt, { delay: "1h" }, A);
      const b = await mustCreate(rt, { delay: "1h" }, B);
      expect(a.tenant).toBe("acme");
      expect(b.tenant).toBe("beta");
      for (const [method, path, body] of [
        ["GET", `/v1/jobs/${a.id}`],
        ["POST", `/v1/jobs/${a.id}/cancel`, {}],
        ["PATCH", `/v1/jobs/${a.id}`, { delay: "5h" }],
      ] as const) {
        const r = await api(rt, method, path, body, B);
        expect([403, 404]).toContain(r.status);
        expectError(r, r.status);
        expect(JSON.stringify(r.body)).not.toContain("acme");
      }
      expectError(await api(rt, "POST", `/v1/jobs/${a.id}/cancel`, { if_version: 1 }, B), 404);
      expect((await api(rt, "GET", `/v1/jobs/${a.id}`, undefined, A)).body).toMatchObject({ status: "scheduled", version: 1, due_at: a.due_at });
      const seenByB = await listIds(B);
      expect(seenByB).toContain(b.id);
      expect(seenByB).not.toContain(a.id);
      expect(await listIds(B, `&status=scheduled&tenant=acme`)).not.toContain(a.id);
      const seenByA = await listIds(A);
      expect(seenByA).toContain(a.id);
      expect(seenByA).not.toContain(b.id);
      const seenByAll = await listIds(ALL);
      expect(seenByAll).toContain(a.id);
      expect(seenByAll).toContain(b.id);
      expect((await api(rt, "GET", `/v1/jobs/${a.id}`, undefined, ALL)).body.tenant).toBe("acme");
      expect((await api(rt, "GET", `/v1/jobs/${b.id}`, undefined, ALL)).body.tenant).toBe("beta");
      // And the owner can act on its own job.
      expect((await api(rt, "POST", `/v1/jobs/${b.id}/cancel`, {}, B)).status).toBe(200);
    });

    test("creating in another tenant: 403 for a tenant token, allowed for *", async () => {
      const n0 = await jobCount();
      expectError(await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, tenant: "beta" }, A), 403);
      expect(await jobCount()).toBe(n0);
      const own = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, tenant: "acme" }, A);
      expect(own.status).toBe(201);
      expect(own.body.tenant).toBe("acme");
      const inBeta = await mustCreate(rt, { tenant: "beta", delay: "1h" }, ALL);
      expect(inBeta.tenant).toBe("beta");
      expect(await listIds(B)).toContain(inBeta.id);
      expect(await listIds(A)).not.toContain(inBeta.id);
      const dflt = await mustCreate(rt, {}, ALL);
      expect(dflt.tenant).toBe("default");
      const batch = await api(rt, "POST", "/v1/jobs/batch", { jobs: [{ target: { url: HOOK } }, { target: { url: HOOK }, tenant: "beta" }] }, A);
      expect(batch.status).toBe(200);
      expect(batch.body.jobs[0].tenant).toBe("acme");
      expect(expectError({ status: 200, body: batch.body.jobs[1] }, 200).code).toBe("forbidden");
    });

    test("/healthz, /readyz and /metrics answer without a token", async () => {
      for (const path of ["/healthz", "/readyz", "/metrics"]) {
        const res = await fetch(rt.url + path);
        expect(res.status).toBe(200);
        await res.text();
      }
      expect((await api(rt, "GET", "/readyz")).body.ok).toBe(true);
    });

    test("with no tokens configured, loopback clients are served", async () => {
      const j = await api(open, "POST", "/v1/jobs", { target: { url: HOOK }, delay: "1h" });
      expect(j.status).toBe(201);
      expect(j.body.tenant).toBe("default");
      expect((await api(open, "GET", `/v1/jobs/${j.body.id}`)).status).toBe(200);
      // A bearer token that means nothing here changes nothing.
      expect((await api(open, "GET", "/v1/jobs", undefined, bearer("whatever"))).status).toBe(200);
      expect(open.url).toStartWith("http://127.0.0.1:");
    });

    test("outside the home region writes → 409 with fly-replay; reads work", async () => {
      const j = await mustCreate(rt, { delay: "1h" }, A);
      const n0 = await jobCount();
      for (const [method, path, body] of [
        ["POST", "/v1/jobs", { target: { url: HOOK } }],
        ["POST", "/v1/jobs/batch", { jobs: [{ target: { url: HOOK } }] }],
        ["POST", `/v1/jobs/${j.id}/cancel`, {}],
        ["PATCH", `/v1/jobs/${j.id}`, { delay: "2h" }],
      ] as const) {
        const r = await api(standby, method, path, body, A);
        expectError(r, 409);
        expect(r.headers.get("fly-replay")).toBe("region=iad");
      }
      expect(await jobCount()).toBe(n0);
      expect((await api(rt, "GET", `/v1/jobs/${j.id}`, undefined, A)).body).toMatchObject({ status: "scheduled", version: 1 });
      const g = await api(standby, "GET", `/v1/jobs/${j.id}`, undefined, A);
      expect(g.status).toBe(200);
      expect(g.body.id).toBe(j.id);
      expect(g.headers.get("fly-replay")).toBeNull();
      expect((await api(standby, "GET", "/v1/jobs", undefined, A)).status).toBe(200);
      // Auth still comes first: no token is 401, not a replay.
      expectError(await api(standby, "POST", "/v1/jobs", { target: { url: HOOK } }), 401);
    });
  });
}
