import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tokenSpec } from "../helpers/tokens.ts";
import { createApp } from "../../src/api/app.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler, testConfig } from "../helpers/scheduler.ts";
import { bearer, expectError, HOOK, mustCreate } from "./support.ts";

const TOKENS = tokenSpec("tokA:acme:jobs:read,jobs:write;tokB:beta:jobs:read,jobs:write;admA:acme:admin;admB:beta:admin");
const A = bearer("tokA");
const B = bearer("tokB");
/** For admin routes (signing keys): tenancy, not the scope, must be what refuses. */
const ADMIN_A = bearer("admA");
const ADMIN_B = bearer("admB");

type Obj = "job" | "schedule" | "signing_key";
/**
 * Every route that names an object by id, with a request that would change it (or show it)
 * if tenancy leaked. A new `:id` route fails the route census below until it is added here.
 */
const ID_ROUTES: Record<string, { obj: Obj; body?: unknown }> = {
  "GET /v1/jobs/:id": { obj: "job" },
  "PATCH /v1/jobs/:id": { obj: "job", body: { delay: "5h" } },
  "POST /v1/jobs/:id/cancel": { obj: "job", body: {} },
  "GET /v1/schedules/:id": { obj: "schedule" },
  "PATCH /v1/schedules/:id": { obj: "schedule", body: { cron: "0 0 1 1 *" } },
  "DELETE /v1/schedules/:id": { obj: "schedule" },
  "POST /v1/schedules/:id/pause": { obj: "schedule", body: {} },
  "POST /v1/schedules/:id/resume": { obj: "schedule", body: {} },
  "POST /v1/schedules/:id/trigger": { obj: "schedule", body: {} },
  "POST /v1/dlq/:id/replay": { obj: "job", body: { reason: "tenancy check" } },
  "POST /v1/signing-keys/:id/rotate": { obj: "signing_key", body: {} },
  "POST /v1/signing-keys/:id/retire": { obj: "signing_key", body: {} },
};
/** Listings: must not show another tenant's objects (checked below). */
const LISTINGS = new Set(["GET /v1/jobs", "GET /v1/schedules", "GET /v1/signing-keys"]);
/**
 * Routes whose credential is an async job's lease token, not a tenant's API token: a token
 * names one job's attempt, and another job's token is refused (test/worker/async-jobs.test.ts).
 */
const LEASE_TOKEN_ROUTES = new Set(["POST /v1/jobs/:id/heartbeat", "POST /v1/jobs/:id/complete"]);
/**
 * Figures and bulk actions scoped to the token's tenant: test/obs/stats.test.ts and
 * test/dlq/dlq-api.test.ts check that a tenant sees and replays only its own.
 */
const TENANT_AGGREGATES = new Set(["GET /v1/stats", "GET /v1/dlq", "POST /v1/dlq/replay", "GET /v1/audit"]);
/** Routes that name no existing object of a tenant (creation is tested in auth.test.ts; cluster is admin). */
const NO_TENANT_OBJECT = new Set([
  "POST /v1/jobs",
  "POST /v1/jobs/batch",
  "POST /v1/schedules",
  "POST /v1/signing-keys",
  "GET /v1/cluster",
  "POST /v1/cluster/failover",
]);

describe("route census", () => {
  test("every /v1 route is classified, and every route with an :id is in the isolation table", () => {
    const app = createApp({ db: {} as never, config: testConfig(), metrics: new Metrics(), log: silentLogger, serveApi: true });
    const routes = app.routes.filter((r) => r.method !== "ALL" && r.path.startsWith("/v1/")).map((r) => `${r.method} ${r.path}`);
    expect(routes.length).toBeGreaterThan(10);
    const unclassified = routes.filter(
      (r) => !(r in ID_ROUTES) && !LISTINGS.has(r) && !NO_TENANT_OBJECT.has(r) && !LEASE_TOKEN_ROUTES.has(r) && !TENANT_AGGREGATES.has(r),
    );
    expect(unclassified).toEqual([]);
    expect(routes.filter((r) => r.includes(":") && !(r in ID_ROUTES) && !LEASE_TOKEN_ROUTES.has(r))).toEqual([]);
    // And the table names no route that is gone.
    for (const r of [...Object.keys(ID_ROUTES), ...LISTINGS, ...LEASE_TOKEN_ROUTES, ...TENANT_AGGREGATES]) expect(routes).toContain(r);
  });
});

for (const driver of DRIVERS) {
  describe(`tenant isolation on every route (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS }, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });

    const snapshot = async () => ({
      jobs: await tdb.db.query("SELECT id, status, version, due_at, updated_at, cancel_requested FROM jobs WHERE tenant = 'beta' ORDER BY id"),
      schedules: await tdb.db.query("SELECT id, cron, paused, version, updated_at, next_fire_at FROM schedules WHERE tenant = 'beta' ORDER BY id"),
      audit: await tdb.db.query("SELECT id FROM audit_log WHERE tenant = 'beta' ORDER BY id"),
      keys: await tdb.db.query("SELECT id, retired_at FROM signing_keys WHERE tenant = 'beta' ORDER BY id"),
    });

    test("tenant A gets 404 (or 403) for each of tenant B's objects on every id route, and nothing changes", async () => {
      const job = await mustCreate(rt, { delay: "1h" }, B);
      const sch = await api(rt, "POST", "/v1/schedules", { id: "b-only", cron: "0 9 * * *", target: { url: HOOK } }, B);
      expect(sch.status).toBe(201);
      // The same schedule id in A's tenant: A acting on it must touch only its own.
      expect((await api(rt, "POST", "/v1/schedules", { id: "shared", cron: "0 9 * * *", target: { url: HOOK } }, A)).status).toBe(201);
      expect((await api(rt, "POST", "/v1/schedules", { id: "shared", cron: "0 9 * * *", target: { url: HOOK } }, B)).status).toBe(201);
      const key = await api(rt, "POST", "/v1/signing-keys", {}, ADMIN_B);
      expect(key.status).toBe(201);
      const ids: Record<Obj, string[]> = { job: [job.id], schedule: ["b-only"], signing_key: [key.body.id] };

      const before = await snapshot();
      for (const [route, spec] of Object.entries(ID_ROUTES)) {
        const [method, pattern] = route.split(" ");
        for (const id of ids[spec.obj]) {
          // ?tenant= must not let a tenant token reach another tenant either.
          for (const q of ["", "?tenant=beta"]) {
            const path = pattern.replace(":id", encodeURIComponent(id)) + q;
            const r = await api(rt, method, path, spec.body, spec.obj === "signing_key" ? ADMIN_A : A);
            try {
              expect([403, 404]).toContain(r.status);
              const err = expectError(r, r.status);
              expect(err.message).not.toStartWith("no route"); // the route exists: this is the tenancy check answering
              expect(JSON.stringify(r.body)).not.toContain("beta");
            } catch (e) {
              throw new Error(`${method} ${path} as tenant A: ${(e as Error).message}`);
            }
          }
        }
      }
      expect(await snapshot()).toEqual(before);

      // B sees its own objects through the same routes (so the 404s above were about tenancy).
      expect((await api(rt, "GET", `/v1/jobs/${job.id}`, undefined, B)).status).toBe(200);
      expect((await api(rt, "GET", "/v1/schedules/b-only", undefined, B)).status).toBe(200);
      // A's action on its own "shared" leaves B's "shared" alone.
      expect((await api(rt, "POST", "/v1/schedules/shared/pause", {}, A)).body.paused).toBe(true);
      expect((await api(rt, "GET", "/v1/schedules/shared", undefined, B)).body.paused).toBe(false);
    });

    test("listings show only the token's tenant, whatever the query asks", async () => {
      const b = await mustCreate(rt, { delay: "1h" }, B);
      const a = await mustCreate(rt, { delay: "1h" }, A);
      for (const q of ["", "?tenant=beta", "?schedule_id=b-only", "?status=scheduled&tenant=beta", "?limit=1000"]) {
        const jobs = await api(rt, "GET", `/v1/jobs${q}`, undefined, A);
        expect(jobs.status).toBe(200);
        const ids = (jobs.body.items as any[]).map((j) => j.id);
        expect(ids).not.toContain(b.id);
        for (const j of jobs.body.items as any[]) expect(j.tenant).toBe("acme");
        const sch = await api(rt, "GET", `/v1/schedules${q}`, undefined, A);
        expect(sch.status).toBe(200);
        for (const s of sch.body.items as any[]) expect(s.tenant).toBe("acme");
      }
      expect(((await api(rt, "GET", "/v1/jobs", undefined, A)).body.items as any[]).map((j) => j.id)).toContain(a.id);
      expect(((await api(rt, "GET", "/v1/schedules", undefined, B)).body.items as any[]).map((s) => s.id)).toContain("b-only");
      const keyB = (await api(rt, "POST", "/v1/signing-keys", {}, ADMIN_B)).body;
      const keyA = (await api(rt, "POST", "/v1/signing-keys", {}, ADMIN_A)).body;
      for (const q of ["", "?tenant=acme", "?status=active", "?limit=1000"]) {
        const keys = await api(rt, "GET", `/v1/signing-keys${q}`, undefined, ADMIN_A);
        expect(keys.status).toBe(200);
        for (const k of keys.body.items as any[]) expect(k.tenant).toBe("acme");
        expect((keys.body.items as any[]).map((k) => k.id)).not.toContain(keyB.id);
      }
      expectError(await api(rt, "GET", "/v1/signing-keys?tenant=beta", undefined, ADMIN_A), 403);
      expect(((await api(rt, "GET", "/v1/signing-keys", undefined, ADMIN_A)).body.items as any[]).map((k) => k.id)).toContain(keyA.id);
    });
  });
}
