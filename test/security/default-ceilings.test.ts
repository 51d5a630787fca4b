// Issue 16, hole 8: ceilings by default. One tenant's calls to a tarpit hold at most its
// share of a worker's slots; schedules per tenant have a quota and a minimum interval;
// catch-up after an outage is paced per tenant, not behind one global cursor; a schedule
// preview stops after a time budget. Real scheduler, real slow HTTP target; both drivers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { ScheduleGenerator } from "../../src/dispatcher/schedule-generator.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { insertSchedule, type ScheduleFields } from "../../src/store/schedules.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { takeShards } from "../helpers/shards.ts";
import { eventually, Target } from "../helpers/target.ts";
import { bearer, expectError } from "../api/support.ts";
import { tokenSpec } from "../helpers/tokens.ts";
import { scheduleFields } from "../schedules/gen-support.ts";

describe("default ceilings: settings", () => {
  test("with tenant tokens, a tenant's running cap defaults to half of WORKER_CONCURRENCY; SCHEDULER_TENANT_SHARE and SCHEDULER_TENANT_MAX_RUNNING change it", () => {
    const TENANTS = { SCHEDULER_TOKENS: tokenSpec("tokA:acme:jobs:write;tokOp:*:admin") };
    expect(loadConfig(TENANTS).flow.tenantDefault.maxRunning).toBe(50);
    expect(loadConfig({ ...TENANTS, WORKER_CONCURRENCY: "10" }).flow.tenantDefault.maxRunning).toBe(5);
    expect(loadConfig({ ...TENANTS, WORKER_CONCURRENCY: "1" }).flow.tenantDefault.maxRunning).toBe(1);
    // One operator's jobs only ("*" tokens, or none): no share unless asked for.
    expect(loadConfig({}).flow.tenantDefault.maxRunning).toBeUndefined();
    expect(loadConfig({ SCHEDULER_TOKENS: tokenSpec("tokOp:*:admin") }).flow.tenantDefault.maxRunning).toBeUndefined();
    expect(loadConfig({ WORKER_CONCURRENCY: "10", SCHEDULER_TENANT_SHARE: "0.25" }).flow.tenantDefault.maxRunning).toBe(3);
    expect(loadConfig({ WORKER_CONCURRENCY: "10", SCHEDULER_TENANT_SHARE: "1" }).flow.tenantDefault.maxRunning).toBe(10);
    expect(loadConfig({ WORKER_CONCURRENCY: "10", SCHEDULER_TENANT_MAX_RUNNING: "7" }).flow.tenantDefault.maxRunning).toBe(7);
    for (const bad of ["0", "1.5", "-0.5", "half"]) expect(() => loadConfig({ SCHEDULER_TENANT_SHARE: bad })).toThrow(ConfigError);
  });

  test("schedules: 1000 per tenant and at most one fire per 10 s by default; both settable", () => {
    const c = loadConfig({});
    expect(c.ceilings).toEqual({ maxSchedules: 1000, schedulesOverrides: {}, minScheduleIntervalMs: 10_000 });
    const d = loadConfig({ SCHEDULER_TENANT_MAX_SCHEDULES: "5", SCHEDULER_MIN_SCHEDULE_INTERVAL: "1m", SCHEDULER_TENANT_QUOTAS: "vip:schedules=50,running=3" });
    expect(d.ceilings).toEqual({ maxSchedules: 5, schedulesOverrides: { vip: 50 }, minScheduleIntervalMs: 60_000 });
    expect(d.flow.tenantOverrides.vip!.maxRunning).toBe(3);
    expect(() => loadConfig({ SCHEDULER_MIN_SCHEDULE_INTERVAL: "500ms" })).toThrow(/SCHEDULER_MIN_SCHEDULE_INTERVAL/);
    expect(() => loadConfig({ SCHEDULER_TENANT_MAX_SCHEDULES: "0" })).toThrow(/SCHEDULER_TENANT_MAX_SCHEDULES/);
    expect(() => loadConfig({ SCHEDULER_TENANT_QUOTAS: "vip:schedules=0" })).toThrow(/SCHEDULER_TENANT_QUOTAS/);
  });
});

for (const driver of DRIVERS) {
  describe(`default ceilings (${driver})`, () => {
    test("a tenant's calls to a tarpit hold at most its share of the slots; another tenant's calls go meanwhile", async () => {
      const t = await freshDb(driver);
      let release: () => void = () => {};
      const gate = new Promise<void>((r) => (release = r));
      let tarpitInFlight = 0;
      let tarpitMax = 0;
      const target = new Target(async (r) => {
        if (!r.path.startsWith("/tarpit")) return new Response("ok");
        tarpitMax = Math.max(tarpitMax, ++tarpitInFlight);
        await gate;
        tarpitInFlight--;
        return new Response("late");
      });
      // Tenants with their own tokens, the default share: half of 10 slots. "30s" stands for
      // the 1 h: longer than the test.
      const rt = await startScheduler(t.db, {
        WORKER_CONCURRENCY: "10",
        SCHEDULER_POLL_INTERVAL: "100ms",
        SCHEDULER_TOKENS: tokenSpec("tokTar:tarpit:jobs:write;tokOther:other:jobs:write"),
      });
      try {
        const tar = await api(
          rt,
          "POST",
          "/v1/jobs/batch",
          { jobs: Array.from({ length: 30 }, (_, i) => ({ target: { url: `${target.url}/tarpit/${i}` }, timeout: "30s" })) },
          bearer("tokTar"),
        );
        expect(tar.status).toBe(200);
        await eventually(() => tarpitInFlight >= 5, 15_000, "the tarpit tenant's share of calls in flight");
        // Let the dispatcher try to hand the tarpit tenant more.
        await Bun.sleep(1000);
        const t0 = Date.now();
        const ok = await api(
          rt,
          "POST",
          "/v1/jobs/batch",
          { jobs: Array.from({ length: 10 }, (_, i) => ({ target: { url: `${target.url}/ok/${i}` } })) },
          bearer("tokOther"),
        );
        expect(ok.status).toBe(200);
        await eventually(
          () => target.calls.filter((c) => c.path.startsWith("/ok/")).length === 10,
          12_000,
          "the other tenant's 10 calls while the tarpit holds its calls",
        );
        expect(Date.now() - t0).toBeLessThan(12_000);
        expect(tarpitMax).toBe(5);
        const running = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE tenant = 'tarpit' AND status IN ('queued', 'running')");
        expect(running[0]!.n).toBeLessThanOrEqual(5);
      } finally {
        release();
        await rt.stop();
        await t.close();
        target.stop();
      }
    });

    describe("schedules", () => {
      let t: TestDb;
      let rt: Runtime;
      beforeAll(async () => {
        t = await freshDb(driver);
        rt = await startScheduler(
          t.db,
          { SCHEDULER_TENANT_MAX_SCHEDULES: "3", SCHEDULER_TENANT_QUOTAS: "vip:schedules=5", SCHEDULER_MIN_SCHEDULE_INTERVAL: "10s" },
          { mode: "api" },
        );
      });
      afterAll(async () => {
        await rt?.stop();
        await t?.close();
      });
      const create = (tenant: string, id: string, cron = "0 3 * * *") =>
        api(rt, "POST", "/v1/schedules", { tenant, id, cron, target: { url: "https://example.com/hook" } });

      test("a tenant has at most SCHEDULER_TENANT_MAX_SCHEDULES (409 schedule_quota_exceeded); others and overrides are apart", async () => {
        for (let i = 0; i < 3; i++) expect((await create("t1", `s${i}`)).status).toBe(201);
        const over = expectError(await create("t1", "s3"), 409);
        expect(over.code).toBe("schedule_quota_exceeded");
        expect((await create("t2", "s0")).status).toBe(201);
        for (let i = 0; i < 5; i++) expect((await create("vip", `s${i}`)).status).toBe(201);
        expect(expectError(await create("vip", "s5"), 409).code).toBe("schedule_quota_exceeded");
        // Deleting one makes room.
        expect((await api(rt, "DELETE", "/v1/schedules/s0?tenant=t1")).status).toBe(200);
        expect((await create("t1", "s3")).status).toBe(201);
        const n = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM schedules WHERE tenant = 't1'");
        expect(n[0]!.n).toBe(3);
      });

      test("concurrent creations cannot overshoot the quota", async () => {
        const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => create("race", `r${i}`)));
        expect(rs.filter((r) => r.status === 201)).toHaveLength(3);
        expect(rs.filter((r) => r.status === 409)).toHaveLength(5);
      });

      test("a rule that fires more often than SCHEDULER_MIN_SCHEDULE_INTERVAL is a 400 naming cron, on create and on a PATCH of the rule", async () => {
        for (const cron of ["* * * * * *", "*/5 * * * * *", "0,1 * * * * *", "0,59 * * * * *"]) {
          const e = expectError(await create("iv", "fast", cron), 400, "cron");
          expect(e.message).toContain("SCHEDULER_MIN_SCHEDULE_INTERVAL");
        }
        expect((await create("iv", "ten", "*/10 * * * * *")).status).toBe(201);
        expect((await create("iv", "minute", "30 * * * * *")).status).toBe(201);
        expectError(await api(rt, "PATCH", "/v1/schedules/minute?tenant=iv", { cron: "*/2 * * * * *" }), 400, "cron");
        expect((await api(rt, "PATCH", "/v1/schedules/minute?tenant=iv", { cron: "15 * * * * *" })).status).toBe(200);
      });

      test("?preview= stops at instants 10 years out and says so; a short preview is whole", async () => {
        expect(
          (
            await api(rt, "POST", "/v1/schedules", {
              tenant: "pv",
              id: "leap-mondays",
              cron: "0 0 29 2 1",
              timezone: "America/New_York",
              target: { url: "https://example.com/hook" },
            })
          ).status,
        ).toBe(201);
        const t0 = performance.now();
        const r = await api(rt, "GET", "/v1/schedules/leap-mondays?tenant=pv&preview=1000");
        const ms = performance.now() - t0;
        expect(r.status).toBe(200);
        expect(r.body.preview_truncated).toBe(true);
        expect(r.body.preview.length).toBeGreaterThan(0);
        expect(r.body.preview.length).toBeLessThan(1000);
        const at = r.body.preview.map((p: any) => Date.parse(p.at));
        expect([...at].sort((a, b) => a - b)).toEqual(at);
        expect(at.at(-1)! - Date.now()).toBeLessThan(10 * 366 * 86_400_000);
        expect(at.at(-1)! - Date.now()).toBeGreaterThan(9 * 365 * 86_400_000);
        // ~50 instants instead of 1000 reaching 236 years out (2.2 s); generous for a loaded machine.
        expect(ms).toBeLessThan(1500);
        const short = await api(rt, "GET", "/v1/schedules/leap-mondays?tenant=pv&preview=2");
        expect(short.body.preview).toHaveLength(2);
        expect(short.body.preview_truncated).toBeUndefined();
        expectError(await api(rt, "GET", "/v1/schedules/leap-mondays?tenant=pv&preview=1001"), 400, "preview");
      });
    });

    test("catch-up is paced per tenant: one tenant's backlog does not push another tenant's catch-up behind it", async () => {
      const t = await freshDb(driver);
      try {
        await seedAuthority(t.db, "local");
        const fence = await takeShards(t.db, "gen");
        const nowS = Math.floor(Date.now() / 1000) * 1000;
        const schedule = (tenant: string, id: string, cron: string, secondsAgo: number, misfire: "fire_all" | "fire_once"): ScheduleFields =>
          scheduleFields(id, { tenant, cron, misfire, misfire_grace_ms: 1000, next_fire_at: new Date(nowS - secondsAgo * 1000) });
        // big: 120 missed per-second occurrences, all to run (fire_all), generated first (older next_fire_at).
        await insertSchedule(t.db, schedule("big", "backlog", "* * * * * *", 120, "fire_all"), { actor: "test", reason: null });
        // small: one missed occurrence to run late (fire_once).
        await insertSchedule(t.db, schedule("small", "report", "0 * * * * *", 61, "fire_once"), { actor: "test", reason: null });
        // 2 catch-up occurrences per second: big's backlog takes a minute to release.
        const gen = new ScheduleGenerator({ db: t.db, batch: 100, catchupPerSecond: 2, log: silentLogger, metrics: new Metrics() });
        expect(await gen.runOnce(fence)).toBe(2);
        const rows = await t.db.query<{ tenant: string; due_at: Date; catchup: boolean; created_at: Date }>(
          "SELECT tenant, due_at, catchup, created_at FROM jobs WHERE catchup ORDER BY due_at",
        );
        const big = rows.filter((r) => r.tenant === "big");
        const small = rows.filter((r) => r.tenant === "small");
        expect(big.length).toBeGreaterThanOrEqual(100);
        expect(small).toHaveLength(1);
        // big's own catch-up is still paced: 2 per second.
        const spanS = (big.at(-1)!.due_at.getTime() - big[0]!.due_at.getTime()) / 1000;
        expect(spanS).toBeGreaterThanOrEqual((big.length - 1) / 2 - 1);
        // small's is due at once, not after big's minute.
        expect(small[0]!.due_at.getTime() - small[0]!.created_at.getTime()).toBeLessThan(5_000);
      } finally {
        await t.close();
      }
    });
  });
}
