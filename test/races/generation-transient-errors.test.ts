// Issue 14, hole 1: a transient SQL error during occurrence generation must not pause the
// schedule. Each case forces a real error in the generating transaction: an injected
// deadlock / lock timeout (the SCHEDULER_TEST_FAULTS seam, a real RAISE with that SQLSTATE),
// a real row lock held by this test's own connection under a lock_timeout, and an error
// outside any savepoint that loses the whole transaction, and the generating transaction's
// backend terminated (pg_terminate_backend) while it waits for that row lock. The schedule
// must stay active, its occurrence must come on a later pass, and
// scheduler_schedule_generation_retries_total must count it. A genuinely broken schedule
// (its rule) is still paused.
// Then the lock order behind the deadlock named in the issue: the coordinator's
// ExpireMisfired must not lock an occurrence and then wait for its schedule, which a shard
// holder's generator holds while it expires that very occurrence (ExpireCoalesced).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ScheduleGenerator } from "../../src/dispatcher/schedule-generator.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { expireMisfired } from "../../src/store/dispatch-queries.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { holdRowLock } from "../helpers/row-lock.ts";
import { insertSchedule } from "../../src/store/schedules.ts";
import type { ShardFence } from "../../src/store/shards.ts";
import { sql } from "../../src/store/sql.ts";
import { withTestFaults } from "../../src/store/test-faults.ts";
import { DRIVERS, describeDb, freshDb, type DriverName, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { memoryLogger } from "../helpers/log.ts";
import { takeShards } from "../helpers/shards.ts";
import { eventually } from "../helpers/target.ts";
import { scheduleFields } from "../schedules/gen-support.ts";

const HOUR = 3_600_000;
const EVERY_S = "* * * * * *";

/** An hourly schedule due now: its occurrence is this hour's nominal time. */
async function hourlyDue(db: Db, id: string): Promise<number> {
  const nominal = Math.floor(Date.now() / HOUR) * HOUR;
  await insertSchedule(db, scheduleFields(id, { next_fire_at: new Date(nominal) }), { actor: "test", reason: null });
  return nominal;
}

/**
 * A per-second fire_once schedule 5 s behind, with an older unstarted occurrence J: the
 * next pass expires J (ExpireCoalesced) before it creates the most recent missed one.
 */
async function coalescing(db: Db, id: string): Promise<{ jobId: string }> {
  const nowS = Math.floor(Date.now() / 1000) * 1000;
  await insertSchedule(db, scheduleFields(id, { cron: EVERY_S, misfire: "fire_once", next_fire_at: new Date(nowS - 5000) }), { actor: "test", reason: null });
  const old = new Date(nowS - 60_000);
  const j = await insertJob(db, { schedule_id: id, nominal_time: old, idempotency_key: `${id}@${old.toISOString()}`, due_at: new Date(Date.now() + HOUR) });
  return { jobId: j.id };
}

async function scheduleRow(db: Db, id: string) {
  return (await db.query<Record<string, any>>("SELECT paused, paused_reason, next_fire_at FROM schedules WHERE id = $1", [id]))[0]!;
}

async function jobsOf(db: Db, id: string) {
  return db.query<{ id: string; status: string; nominal_time: Date }>(
    "SELECT id, status, nominal_time FROM jobs WHERE schedule_id = $1 ORDER BY nominal_time",
    [id],
  );
}

/** The retries counter by code, read from the registry (0 when it or the series is absent). */
async function retries(m: Metrics, code: string): Promise<number> {
  const c = m.registry.getSingleMetric("scheduler_schedule_generation_retries_total");
  if (!c) return 0;
  return (await c.get()).values.find((v) => v.labels.code === code)?.value ?? 0;
}

/** A fault armed for the first `n` runs of its query, then off. */
const firstN = (n: number) => () => (n-- > 0 ? 0 : 1);

function generatorOn(db: Db, metrics: Metrics, log = memoryLogger()) {
  return { gen: new ScheduleGenerator({ db, batch: 100, catchupPerSecond: 1000, log: log.log, metrics }), log };
}

for (const driver of DRIVERS) {
  describe(`injected transient errors during generation (${driver})`, () => {
    let t: TestDb;
    let fence: ShardFence;
    beforeAll(async () => {
      t = await freshDb(driver as DriverName);
      await seedAuthority(t.db, "local");
      fence = await takeShards(t.db, "G");
    });
    afterAll(async () => {
      await t?.close();
    });

    test.each([
      ["AdvanceSchedule", "40P01"],
      ["InsertJobs", "55P03"],
      ["ActiveOccurrences", "40001"],
    ])("%s failing with %s once: the schedule stays active and its occurrence comes on the next pass", async (query, code) => {
      const id = `transient-${query}`;
      const nominal = await hourlyDue(t.db, id);
      const metrics = new Metrics();
      const faulty = withTestFaults(t.db, [{ query, code, probability: 1 }], { random: firstN(1) });
      // ActiveOccurrences runs only for overlap != allow.
      if (query === "ActiveOccurrences") await t.db.query("UPDATE schedules SET overlap = 'skip' WHERE id = $1", [id]);
      const { gen, log } = generatorOn(faulty, metrics);

      await gen.runOnce(fence);
      let s = await scheduleRow(t.db, id);
      expect(s.paused).toBe(false);
      expect(s.paused_reason).toBeNull();
      // Its savepoint undid the pass's work for it: no job, next_fire_at where it was.
      expect(s.next_fire_at.getTime()).toBe(nominal);
      expect(await jobsOf(t.db, id)).toEqual([]);
      expect(await retries(metrics, code)).toBe(1);
      expect(log.find("retrying shortly").length).toBeGreaterThanOrEqual(1);

      await gen.runOnce(fence);
      s = await scheduleRow(t.db, id);
      expect(s.paused).toBe(false);
      expect(s.next_fire_at.getTime()).toBe(nominal + HOUR);
      const js = await jobsOf(t.db, id);
      expect(js.map((j) => j.nominal_time.getTime())).toEqual([nominal]);
      expect(await retries(metrics, code)).toBe(1);
    });

    test.each([
      ["DueSchedules", "57014"],
      ["LockShards", "08006"],
    ])("%s failing with %s loses the whole transaction: nothing paused or advanced, the next pass generates", async (query, code) => {
      const id = `whole-tx-${query}`;
      const nominal = await hourlyDue(t.db, id);
      await t.db.query("UPDATE schedules SET paused = true WHERE id LIKE 'whole-tx-%' AND id <> $1", [id]);
      const metrics = new Metrics();
      const faulty = withTestFaults(t.db, [{ query, code, probability: 1 }], { random: firstN(1) });
      const { gen } = generatorOn(faulty, metrics);
      const err = await gen.runOnce(fence).then(
        () => undefined,
        (e) => e,
      );
      expect(err?.code).toBe(code);
      let s = await scheduleRow(t.db, id);
      expect(s.paused).toBe(false);
      expect(s.next_fire_at.getTime()).toBe(nominal);
      expect(await jobsOf(t.db, id)).toEqual([]);
      expect(await retries(metrics, code)).toBe(1);
      expect(await gen.runOnce(fence)).toBeGreaterThanOrEqual(1);
      s = await scheduleRow(t.db, id);
      expect(s.paused).toBe(false);
      expect(s.next_fire_at.getTime()).toBe(nominal + HOUR);
      expect((await jobsOf(t.db, id)).map((j) => j.nominal_time.getTime())).toEqual([nominal]);
    });

    test("the pass's schedules written together: a value refused is looked for one schedule at a time; only the first schedule's insert (refused again) pauses it, the rest are made in the same pass", async () => {
      await t.db.query("UPDATE schedules SET paused = true WHERE NOT paused");
      const nominals = [await hourlyDue(t.db, "together-a"), await hourlyDue(t.db, "together-b"), await hourlyDue(t.db, "together-c")];
      const metrics = new Metrics();
      // The batch's insert and then the first schedule's own are refused (22023, a data error).
      const faulty = withTestFaults(t.db, [{ query: "InsertJobs", code: "22023", probability: 1 }], { random: firstN(2) });
      const { gen } = generatorOn(faulty, metrics);
      expect(await gen.runOnce(fence)).toBe(3);
      const rows = await t.db.query<{ id: string; paused: boolean }>("SELECT id, paused FROM schedules WHERE id LIKE 'together-%' ORDER BY id");
      expect(rows.filter((r) => r.paused).length).toBe(1);
      for (const r of rows.filter((r) => !r.paused)) expect((await jobsOf(t.db, r.id)).map((j) => j.nominal_time.getTime())).toEqual([nominals[0]]);
      expect(await jobsOf(t.db, rows.find((r) => r.paused)!.id)).toEqual([]);
      expect(await retries(metrics, "22023")).toBe(0);
    });

    test("a genuinely broken schedule (its rule) is still paused, and a transient error beside it pauses nothing", async () => {
      await hourlyDue(t.db, "broken-rule");
      await t.db.query("UPDATE schedules SET cron = 'not a cron' WHERE id = 'broken-rule'");
      const nominal = await hourlyDue(t.db, "beside-broken");
      const metrics = new Metrics();
      // The faults hit whichever schedule's AdvanceSchedule runs first; the broken one never
      // gets that far (its rule fails first), so it is the healthy one's.
      const faulty = withTestFaults(t.db, [{ query: "AdvanceSchedule", code: "40P01", probability: 1 }], { random: firstN(1) });
      const { gen } = generatorOn(faulty, metrics);
      await gen.runOnce(fence);
      const broken = await scheduleRow(t.db, "broken-rule");
      expect(broken.paused).toBe(true);
      expect(broken.paused_reason).toContain("generation failed");
      expect((await scheduleRow(t.db, "beside-broken")).paused).toBe(false);
      await gen.runOnce(fence);
      expect((await jobsOf(t.db, "beside-broken")).map((j) => j.nominal_time.getTime())).toEqual([nominal]);
      expect((await scheduleRow(t.db, "beside-broken")).paused).toBe(false);
    });

    test("a skip decided in a batch that a transient error rolls back is logged once, when it is written", async () => {
      await t.db.query("UPDATE schedules SET paused = true WHERE NOT paused");
      const nominal = await hourlyDue(t.db, "skiplog-busy");
      await t.db.query("UPDATE schedules SET overlap = 'skip' WHERE id = 'skiplog-busy'");
      const earlier = new Date(nominal - HOUR);
      await insertJob(t.db, { schedule_id: "skiplog-busy", nominal_time: earlier, idempotency_key: `skiplog-busy@${earlier.toISOString()}`, due_at: earlier });
      await t.db.query("UPDATE jobs SET status = 'running' WHERE schedule_id = 'skiplog-busy'");
      await hourlyDue(t.db, "skiplog-free"); // its insert is what fails first
      const metrics = new Metrics();
      const faulty = withTestFaults(t.db, [{ query: "InsertJobs", code: "40P01", probability: 1 }], { random: firstN(1) });
      const { gen, log } = generatorOn(faulty, metrics);
      await gen.runOnce(fence);
      expect(await jobsOf(t.db, "skiplog-free")).toEqual([]);
      await gen.runOnce(fence);
      expect((await jobsOf(t.db, "skiplog-free")).length).toBe(1);
      const skips = log.find("occurrence skipped").filter((l) => l.schedule_id === "skiplog-busy");
      // Before: once for the pass rolled back and once for the pass written.
      expect(skips.map((l) => l.nominal_time)).toEqual([new Date(nominal).toISOString()]);
    });
  });
}

describe("a real lock wait during generation (postgres)", () => {
  let t: TestDb;
  let fence: ShardFence;
  beforeAll(async () => {
    t = await freshDb("postgres");
    await seedAuthority(t.db, "local");
    fence = await takeShards(t.db, "G");
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A connection of the test's own, holding a row lock on job `id` until release(). */
  const holdJobLock = (id: string) => holdRowLock(t.url!, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", [id]);

  test("a lock timeout (55P03) on the occurrence it must expire: retried, not paused", async () => {
    const { jobId } = await coalescing(t.db, "lock-timeout");
    const before = await scheduleRow(t.db, "lock-timeout");
    // As an operator may set it: every new session of this database gives up a lock wait.
    const dbName = new URL(t.url!).pathname.slice(1);
    await t.db.query(`ALTER DATABASE ${dbName} SET lock_timeout = '300ms'`);
    const genDb = openPostgres({ url: t.url!, maxConnections: 2, applicationName: "generator-under-test" });
    const holder = await holdJobLock(jobId);
    try {
      const metrics = new Metrics();
      const { gen } = generatorOn(genDb, metrics);
      await gen.runOnce(fence);
      const s = await scheduleRow(t.db, "lock-timeout");
      expect(s.paused).toBe(false);
      expect(s.next_fire_at.getTime()).toBe(before.next_fire_at.getTime());
      expect((await jobsOf(t.db, "lock-timeout")).map((j) => j.status)).toEqual(["scheduled"]);
      expect(await retries(metrics, "55P03")).toBe(1);
      await holder.release();
      await gen.runOnce(fence);
      const after = await scheduleRow(t.db, "lock-timeout");
      expect(after.paused).toBe(false);
      expect(after.next_fire_at.getTime()).toBeGreaterThan(before.next_fire_at.getTime());
      const js = await jobsOf(t.db, "lock-timeout");
      expect(js[0]).toMatchObject({ id: jobId, status: "expired" });
      expect(js.length).toBeGreaterThanOrEqual(2);
    } finally {
      await holder.release();
      await t.db.query(`ALTER DATABASE ${dbName} RESET lock_timeout`);
      await genDb.close();
    }
  });

  test("the generating transaction's backend terminated while it waits for a lock: the pass fails, catchably; nothing paused; the next pass generates", async () => {
    const { jobId } = await coalescing(t.db, "killed-backend");
    const before = await scheduleRow(t.db, "killed-backend");
    const genDb = openPostgres({ url: t.url!, maxConnections: 2, applicationName: "generator-killed" });
    const holder = await holdJobLock(jobId);
    try {
      const metrics = new Metrics();
      const { gen } = generatorOn(genDb, metrics);
      const pass = gen.runOnce(fence).then(
        () => undefined,
        (e) => e,
      );
      // The generator inside its transaction, in ExpireCoalesced, waiting for our lock on J.
      const waiting = await eventually(
        async () =>
          (
            await t.db.query<{ pid: number }>(
              "SELECT pid FROM pg_stat_activity WHERE application_name = 'generator-killed' AND cardinality(pg_blocking_pids(pid)) > 0",
            )
          ).at(0),
        10_000,
        "the generator to wait for the lock on the occurrence",
      );
      await t.db.query("SELECT pg_terminate_backend($1)", [waiting.pid]);
      // Before the driver fix this was an uncaught TypeError (a write to the closed
      // connection's null socket, from a setImmediate) that ended the process.
      const err = await pass;
      expect(err?.code).toBe("CONNECTION_CLOSED");
      expect(await retries(metrics, "CONNECTION_CLOSED")).toBe(1);
      let s = await scheduleRow(t.db, "killed-backend");
      expect(s.paused).toBe(false);
      expect(s.paused_reason).toBeNull();
      expect(s.next_fire_at.getTime()).toBe(before.next_fire_at.getTime());
      expect((await jobsOf(t.db, "killed-backend")).map((j) => j.status)).toEqual(["scheduled"]);

      await holder.release();
      // The same pool: its killed connection is replaced.
      expect(await gen.runOnce(fence)).toBeGreaterThanOrEqual(1);
      s = await scheduleRow(t.db, "killed-backend");
      expect(s.paused).toBe(false);
      expect(s.next_fire_at.getTime()).toBeGreaterThan(before.next_fire_at.getTime());
      const js = await jobsOf(t.db, "killed-backend");
      expect(js[0]).toMatchObject({ id: jobId, status: "expired" });
      expect(js.length).toBeGreaterThanOrEqual(2);
    } finally {
      await holder.release();
      await genDb.close();
    }
  });
});

describe("ExpireMisfired and a generator on the same schedule: no deadlock (postgres)", () => {
  const t = describeDb("postgres");

  test("the generator holds S and expires J while the coordinator expires misfired J: both finish, J expired once", async () => {
    // J: an unstarted occurrence of S past its start_by (the coordinator's to expire), and
    // older than S's most recent missed occurrence (the generator's to coalesce).
    await insertSchedule(t.db, scheduleFields("S", { cron: EVERY_S, misfire: "fire_once", next_fire_at: new Date(Date.now() + HOUR) }), {
      actor: "test",
      reason: null,
    });
    const nominal = new Date(Date.now() - 60_000);
    const j = await insertJob(t.db, {
      schedule_id: "S",
      nominal_time: nominal,
      idempotency_key: `S@${nominal.toISOString()}`,
      start_by: new Date(Date.now() - 1000),
    });
    // The generator's side, on a connection of its own: DueSchedules' lock on S, then
    // ExpireCoalesced on J, in one transaction, as a shard holder's pass does.
    const gconn = openPostgres({ url: t.url!, maxConnections: 1, applicationName: "generator-side" });
    const coordinator = openPostgres({ url: t.url!, maxConnections: 1, applicationName: "coordinator-side" });
    let gPid = 0;
    let expiring: Promise<unknown> | undefined;
    let coalesced: unknown;
    try {
      await gconn
        .tx(async (q) => {
          gPid = (await q.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid;
          await q.query("SELECT 1 FROM schedules WHERE tenant = 'default' AND id = 'S' FOR UPDATE");
          let settled = false;
          expiring = expireMisfired(coordinator, 100)
            .then(
              (r) => r,
              (e) => e,
            )
            .finally(() => (settled = true));
          // The coordinator either finishes at once or is seen waiting for our lock on S.
          await eventually(
            async () =>
              settled ||
              (await t.db.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'coordinator-side' AND $1 = ANY(pg_blocking_pids(pid))", [gPid]))
                .length > 0,
            10_000,
            "coordinator finished or blocked on the schedule",
          );
          coalesced = await q.query(sql("ExpireCoalesced"), ["default", "S", new Date()]).then(
            (r) => r,
            (e) => e,
          );
          if (coalesced instanceof Error) throw coalesced;
        })
        .catch(() => {});
    } finally {
      await gconn.close();
    }
    const coordinatorResult = await expiring;
    await coordinator.close();
    // Neither side was chosen as a deadlock victim.
    expect((coalesced as any)?.code).toBeUndefined();
    expect((coordinatorResult as any)?.code).toBeUndefined();
    // J was expired exactly once: by the generator (the coordinator skipped what it could
    // not lock in order and leaves it to a later pass, which finds it finished).
    expect((coalesced as { id: string }[]).map((r) => r.id)).toEqual([j.id]);
    expect(coordinatorResult).toEqual([]);
    const row = (await t.db.query<{ status: string; dead_reason: string }>("SELECT status, dead_reason FROM jobs WHERE id = $1", [j.id]))[0]!;
    expect(row).toEqual({ status: "expired", dead_reason: "misfire" });
    expect(await expireMisfired(t.db, 100)).toEqual([]);
  });

  test("with the schedule free, the coordinator expires the misfired occurrence", async () => {
    await insertSchedule(t.db, scheduleFields("S2", { cron: EVERY_S, misfire: "fire_once", next_fire_at: new Date(Date.now() + HOUR) }), {
      actor: "test",
      reason: null,
    });
    const nominal = new Date(Date.now() - 60_000);
    const j = await insertJob(t.db, {
      schedule_id: "S2",
      nominal_time: nominal,
      idempotency_key: `S2@${nominal.toISOString()}`,
      start_by: new Date(Date.now() - 1000),
    });
    const one = await insertJob(t.db, { start_by: new Date(Date.now() - 1000) });
    expect((await expireMisfired(t.db, 100)).map((r) => r.id).sort()).toEqual([j.id, one.id].sort());
  });
});
