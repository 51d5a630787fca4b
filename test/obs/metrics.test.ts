/**
 * The metrics an operator reads to tell which stage is slow, loaded after real jobs went
 * through a real scheduler: values, not just names.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { scrape, series } from "../helpers/metrics.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

describe("metrics after real traffic (postgres)", () => {
  let t: TestDb | undefined;
  let rt: Runtime | undefined;
  let target: Target | undefined;
  afterEach(async () => {
    await rt?.stop();
    await t?.close();
    target?.stop();
    rt = t = target = undefined;
  });

  test("delivery outcomes, retries by class, the DLQ, every lag histogram, occurrences and leadership", async () => {
    target = new Target(async (r, n) => {
      if (r.path.startsWith("/ok")) return Bun.sleep(50).then(() => new Response("ok"));
      if (r.path === "/flaky") return new Response("x", { status: target!.calls.filter((c) => c.path === "/flaky").length === 1 ? 500 : 200 });
      if (r.path === "/throttle")
        return target!.calls.filter((c) => c.path === "/throttle").length === 1
          ? new Response("slow", { status: 429, headers: { "retry-after": "0" } })
          : new Response("ok");
      void n;
      return new Response("no", { status: 400 });
    });
    t = await freshDb("postgres");
    rt = await startScheduler(t.db);
    const retry = { max_attempts: 3, base: "100ms", max: "200ms" };
    const jobs = [
      ...[0, 1, 2].map((i) => ({ target: { url: `${target!.url}/ok/${i}` } })),
      { target: { url: `${target.url}/flaky` }, retry },
      { target: { url: `${target.url}/throttle` }, retry },
      { target: { url: `${target.url}/perm` }, retry },
    ];
    const res = await api(rt, "POST", "/v1/jobs/batch", { jobs });
    expect(res.status).toBe(200);
    const sched = await api(rt, "POST", "/v1/schedules", { id: "tick", cron: "* * * * * *", timezone: "UTC", target: { url: `${target.url}/ok/tick` } });
    expect(sched.status).toBe(201);
    await eventually(
      async () => {
        const [r] = await t!.db.query<{ n: string | number }>("SELECT count(*) AS n FROM jobs WHERE schedule_id IS NULL AND status IN ('succeeded','dead')");
        return Number(r!.n) === 6 && target!.calls.some((c) => c.path === "/ok/tick");
      },
      15_000,
      "the six jobs to end and an occurrence to run",
    );
    await api(rt, "POST", "/v1/schedules/tick/pause", {});
    await Bun.sleep(2200); // scrape cache (2 s) and a second of DLQ age

    const m = await scrape(rt.url!);
    expect(series(m, 'scheduler_deliveries_total{outcome="success"}')).toBeGreaterThanOrEqual(6);
    expect(series(m, 'scheduler_deliveries_total{outcome="transient"}')).toBe(1);
    expect(series(m, 'scheduler_deliveries_total{outcome="throttled"}')).toBe(1);
    expect(series(m, 'scheduler_deliveries_total{outcome="permanent"}')).toBe(1);
    expect(series(m, 'scheduler_retries_total{class="transient"}')).toBe(1);
    expect(series(m, 'scheduler_retries_total{class="throttled"}')).toBe(1);
    expect(series(m, "scheduler_dlq_ingress_total")).toBe(1);
    expect(series(m, "scheduler_dlq_jobs")).toBe(1);
    expect(series(m, "scheduler_dlq_oldest_age_seconds")).toBeGreaterThanOrEqual(1);
    // Every call went due → claimed → dispatched → started → answered; successes end to end.
    const calls = target.calls.length;
    expect(series(m, "scheduler_scheduling_lag_seconds_count")).toBeGreaterThanOrEqual(calls);
    expect(series(m, "scheduler_dispatch_lag_seconds_count")).toBeGreaterThanOrEqual(calls);
    expect(series(m, "scheduler_queue_wait_seconds_count")).toBe(calls);
    expect(series(m, "scheduler_execution_duration_seconds_count")).toBe(calls);
    const okCalls = target.calls.filter((c) => c.path.startsWith("/ok")).length;
    expect(series(m, "scheduler_execution_duration_seconds_sum")).toBeGreaterThanOrEqual(okCalls * 0.05);
    expect(series(m, "scheduler_end_to_end_seconds_count")).toBe(series(m, 'scheduler_jobs{status="succeeded"}'));
    expect(series(m, 'scheduler_occurrences_total{result="generated"}')).toBeGreaterThanOrEqual(1);
    expect(series(m, "scheduler_dispatch_leader")).toBe(1);
    expect(series(m, "scheduler_region_home")).toBe(1);
    expect(series(m, "scheduler_authority_epoch")).toBeGreaterThan(0);
    // Labelled by state: no series until a lease lapses, and none did.
    expect([...m.keys()].filter((k) => k.startsWith("scheduler_lease_expiries_total"))).toEqual([]);
    expect(series(m, "scheduler_duplicate_attempts_total")).toBe(0);
    expect(series(m, 'scheduler_jobs{status="dead"}')).toBe(1);
  }, 30_000);

  test("backlog gauges: due backlog, overdue, oldest due age, queue depth and per-tenant backlog", async () => {
    t = await freshDb("postgres");
    // No dispatcher: nothing drains what is due.
    rt = await startScheduler(t.db, {}, { mode: "api" });
    const twoMinAgo = new Date(Date.now() - 120_000);
    for (let i = 0; i < 3; i++) await insertJob(t.db, { tenant: "acme", due_at: twoMinAgo });
    await insertJob(t.db, { tenant: "beta", due_at: new Date(Date.now() - 1000) });
    await insertJob(t.db, { tenant: "beta", due_at: new Date(Date.now() + 3_600_000) });
    const q = await insertJob(t.db, { due_at: new Date(Date.now() - 5000) });
    await t.db.query("UPDATE jobs SET status = 'queued', queued_at = now() WHERE id = $1", [q.id]);
    const m = await scrape(rt.url!);
    expect(series(m, "scheduler_due_backlog")).toBe(4);
    expect(series(m, "scheduler_overdue_jobs")).toBe(3);
    expect(series(m, "scheduler_oldest_due_age_seconds")).toBeGreaterThanOrEqual(119);
    expect(series(m, "scheduler_queue_depth")).toBe(1);
    expect(series(m, 'scheduler_tenant_due_backlog{tenant="acme"}')).toBe(3);
    expect(series(m, 'scheduler_tenant_due_backlog{tenant="beta"}')).toBe(1);
    expect(series(m, "scheduler_dispatch_leader")).toBe(0);
    // The same backlog per dispatch shard (16 by default): it adds up, and the oldest age per shard is there.
    const shards = [...m.entries()].filter(([k]) => k.startsWith("scheduler_shard_due_backlog{"));
    expect(shards).toHaveLength(16);
    expect(shards.reduce((a, [, v]) => a + v, 0)).toBe(4);
    expect(Math.max(...[...m.entries()].filter(([k]) => k.startsWith("scheduler_shard_oldest_due_age_seconds{")).map(([, v]) => v))).toBeGreaterThanOrEqual(
      119,
    );
    // The forecast: one job due within the hour, none within 15 minutes.
    expect(series(m, 'scheduler_due_soon{within="15m"}')).toBe(0);
  }, 20_000);

  test("due-soon forecast and the hot-shard signal", async () => {
    t = await freshDb("postgres");
    rt = await startScheduler(t.db, {}, { mode: "api" });
    const inMs = (ms: number) => new Date(Date.now() + ms);
    await insertJob(t.db, { due_at: inMs(30_000) });
    await insertJob(t.db, { due_at: inMs(3 * 60_000) });
    await insertJob(t.db, { due_at: inMs(10 * 60_000) });
    await insertJob(t.db, { due_at: inMs(20 * 60_000) });
    // 150 due jobs all in shard 0 (slot 0: the id's last 12 bits), 2 in another: shard 0
    // is far above the median for three snapshots in a row.
    const past = new Date(Date.now() - 1000);
    for (let i = 0; i < 150; i++) await insertJob(t.db, { id: `${Bun.randomUUIDv7().slice(0, -3)}000`, due_at: past });
    for (let i = 0; i < 2; i++) await insertJob(t.db, { id: `${Bun.randomUUIDv7().slice(0, -3)}fff`, due_at: past });
    let m = await scrape(rt.url!);
    expect(series(m, 'scheduler_due_soon{within="1m"}')).toBe(1);
    expect(series(m, 'scheduler_due_soon{within="5m"}')).toBe(2);
    expect(series(m, 'scheduler_due_soon{within="15m"}')).toBe(3);
    expect(series(m, 'scheduler_shard_due_backlog{shard="0"}')).toBe(150);
    expect(series(m, 'scheduler_shard_due_backlog{shard="15"}')).toBe(2);
    expect(series(m, "scheduler_hot_shards")).toBe(0); // one snapshot is not yet "stays"
    // Snapshots are cached for 2 s: two more fresh ones make three in a row.
    for (let i = 0; i < 2; i++) {
      await Bun.sleep(2100);
      m = await scrape(rt.url!);
    }
    expect(series(m, "scheduler_hot_shards")).toBe(1);
  }, 20_000);
});
