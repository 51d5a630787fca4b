import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Config } from "../../src/config.ts";
import { RetentionPruner } from "../../src/dispatcher/retention-pruner.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import type { Db } from "../../src/store/db.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { payloadOf, storePayloads } from "../../src/store/payloads.ts";
import { insertSchedule } from "../../src/store/schedules.ts";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { startScheduler, testConfig } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

const DAY = 86_400_000;
const defaults = (): Config["retention"] => ({ ...testConfig().retention, intervalMs: 100_000 });

/** A job finished `ageMs` ago in `status` (set straight in SQL: the pruner only reads rows), with `attempts` attempt rows. */
async function finished(db: Db, status: string, ageMs: number | null, o: { attempts?: number; bodyRef?: string } = {}) {
  const j = newJob(
    o.bodyRef ? { target: { url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: true, body_ref: o.bodyRef, body_size: 10 } } : {},
  );
  await insertJobs(db, [j]);
  await db.query(
    "UPDATE jobs SET status = $2, finished_at = CASE WHEN $3::float8 IS NULL THEN NULL ELSE now() - make_interval(secs => $3::float8 / 1000) END WHERE id = $1",
    [j.id, status, ageMs],
  );
  for (let n = 1; n <= (o.attempts ?? 0); n++) {
    await db.query(
      "INSERT INTO attempts (id, job_id, number, lease_generation, worker, started_at, finished_at, outcome) VALUES (gen_random_uuid(), $1, $2, 1, 'w', now() - interval '40 days', now() - interval '40 days', 'transient')",
      [j.id, n],
    );
  }
  return j.id;
}

const exists = async (db: Db, table: string, col: string, v: string) => (await db.query(`SELECT 1 FROM ${table} WHERE ${col} = $1`, [v])).length > 0;
const count = async (db: Db, q: string, p: unknown[] = []) => Number((await db.query<{ n: string }>(q, p))[0].n);

for (const driver of DRIVERS) {
  describe(`retention (${driver})`, () => {
    let tdb: TestDb;
    beforeAll(async () => {
      tdb = await freshDb(driver);
    });
    afterAll(async () => {
      await tdb?.close();
    });

    const pruner = (over: Partial<Config["retention"]> = {}, metrics = new Metrics(), leader = true) =>
      new RetentionPruner({ db: tdb.db, retention: { ...defaults(), ...over }, log: silentLogger, metrics, isLeader: () => leader });

    test("prunes only what it should: old finished jobs with their attempts, unreferenced old payloads", async () => {
      const db = tdb.db;
      await db.query("DELETE FROM attempts");
      await db.query("DELETE FROM jobs");
      const oldOk = await finished(db, "succeeded", 8 * DAY, { attempts: 2 });
      const newOk = await finished(db, "succeeded", 1 * DAY, { attempts: 1 });
      const oldCancelled = await finished(db, "cancelled", 8 * DAY);
      const oldExpired = await finished(db, "expired", 8 * DAY);
      const deadInPeriod = await finished(db, "dead", 8 * DAY, { attempts: 3 });
      const deadPast = await finished(db, "dead", 31 * DAY, { attempts: 1 });
      // Not finished: untouched whatever their timestamps say.
      const scheduled = await finished(db, "scheduled", 90 * DAY);
      const running = await finished(db, "running", 90 * DAY, { attempts: 1 });
      const queued = await finished(db, "queued", null);
      await db.query("INSERT INTO audit_log (at, actor, action) VALUES (now() - interval '400 days', 'test', 'old.thing')");

      // Payloads: referenced by a live job, by a schedule, only by a job pruned now, by nothing (old), by nothing (recent).
      const [byJob, bySchedule, byPrunedJob, orphanOld, orphanNew] = ["job", "schedule", "pruned", "orphan-old", "orphan-new"].map((s) =>
        payloadOf(`${s} ${Math.random()}`),
      );
      await db.tx((q) => storePayloads(q, [byJob, bySchedule, byPrunedJob, orphanOld, orphanNew]));
      await db.query("UPDATE payloads SET used_at = now() - interval '2 days' WHERE hash <> $1", [orphanNew.ref]);
      const liveRef = await finished(db, "scheduled", null, { bodyRef: byJob.ref });
      const prunedRef = await finished(db, "succeeded", 9 * DAY, { bodyRef: byPrunedJob.ref });
      await insertSchedule(
        db,
        {
          tenant: "default",
          id: "keeps-payload",
          cron: "0 9 * * *",
          timezone: "UTC",
          dst_gap: null,
          dst_fold: null,
          target: { url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: false, body_ref: bySchedule.ref, body_size: 10 },
          priority: 0,
          max_attempts: 1,
          backoff_base_ms: 1000,
          backoff_max_ms: 1000,
          timeout_ms: 1000,
          misfire: "skip",
          misfire_grace_ms: null,
          catchup_window_ms: DAY,
          overlap: "skip",
          max_queued: 1,
          window_ms: 0,
          paused: true,
          start_at: null,
          end_at: null,
          next_fire_at: null,
        },
        { actor: "test" },
      );

      const metrics = new Metrics();
      const r = await pruner({}, metrics).runOnce();
      expect(r.pruned).toEqual({ succeeded: 2, cancelled: 1, expired: 1, dead: 1, payload: 2 });
      expect(r.more).toBe(false);

      for (const id of [oldOk, oldCancelled, oldExpired, deadPast, prunedRef]) expect(await exists(db, "jobs", "id", id)).toBe(false);
      for (const id of [newOk, deadInPeriod, scheduled, running, queued, liveRef]) expect(await exists(db, "jobs", "id", id)).toBe(true);
      expect(await count(db, "SELECT count(*) AS n FROM attempts WHERE job_id = ANY($1::uuid[])", [[oldOk, deadPast]])).toBe(0);
      expect(await count(db, "SELECT count(*) AS n FROM attempts WHERE job_id = ANY($1::uuid[])", [[newOk, deadInPeriod, running]])).toBe(5);
      expect(await count(db, "SELECT count(*) AS n FROM audit_log WHERE action = 'old.thing'")).toBe(1);
      for (const p of [byJob, bySchedule, orphanNew]) expect(await exists(db, "payloads", "hash", p.ref)).toBe(true);
      for (const p of [orphanOld, byPrunedJob]) expect(await exists(db, "payloads", "hash", p.ref)).toBe(false);

      const text = await metrics.registry.getSingleMetricAsString("scheduler_pruned_total");
      expect(text).toContain('scheduler_pruned_total{kind="succeeded"} 2');
      expect(text).toContain('scheduler_pruned_total{kind="payload"} 2');
      expect(text).toContain('scheduler_pruned_total{kind="dead"} 1');

      // Nothing more to do: a second pass deletes nothing; a referenced payload is still kept.
      expect((await pruner({}, metrics).runOnce()).pruned).toEqual({});
      expect(await exists(db, "payloads", "hash", bySchedule.ref)).toBe(true);
    });

    test("periods are settings: off keeps for ever, audit pruned only when asked", async () => {
      const db = tdb.db;
      await db.query("DELETE FROM attempts");
      await db.query("DELETE FROM jobs");
      await db.query("DELETE FROM audit_log");
      const ok = await finished(db, "succeeded", 400 * DAY);
      const dead = await finished(db, "dead", 10 * DAY);
      await db.query("INSERT INTO audit_log (at, actor, action) VALUES (now() - interval '100 days', 'test', 'a'), (now(), 'test', 'b')");
      expect((await pruner({ succeededMs: null, auditMs: null }).runOnce()).pruned).toEqual({});
      expect(await exists(db, "jobs", "id", ok)).toBe(true);
      const r = await pruner({ succeededMs: null, deadMs: 5 * DAY, auditMs: 90 * DAY }).runOnce();
      expect(r.pruned).toEqual({ dead: 1, audit: 1 });
      expect(await exists(db, "jobs", "id", dead)).toBe(false);
      expect((await db.query<{ action: string }>("SELECT action FROM audit_log")).map((x) => x.action)).toEqual(["b"]);
    });

    test("a backlog goes in bounded batches over several passes; a non-leader prunes nothing", async () => {
      const db = tdb.db;
      await db.query("DELETE FROM attempts");
      await db.query("DELETE FROM jobs");
      const jobs = Array.from({ length: 230 }, () => newJob());
      await insertJobs(db, jobs);
      await db.query("UPDATE jobs SET status = 'succeeded', finished_at = now() - interval '10 days'");
      expect((await pruner({ batch: 50 }, new Metrics(), false).runOnce()).pruned).toEqual({});
      const p = pruner({ batch: 50 });
      const passes: number[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await p.runOnce();
        passes.push(r.pruned.succeeded ?? 0);
        if (!r.more) break;
      }
      expect(passes).toEqual([50, 50, 50, 50, 30]);
      expect(await count(db, "SELECT count(*) AS n FROM jobs")).toBe(0);
    });

    test("the loop drains a backlog without waiting a full interval between batches, and stops", async () => {
      const db = tdb.db;
      await insertJobs(
        db,
        Array.from({ length: 120 }, () => newJob()),
      );
      await db.query("UPDATE jobs SET status = 'cancelled', finished_at = now() - interval '10 days'");
      const p = pruner({ batch: 25, intervalMs: 60_000 });
      p.start();
      try {
        await eventually(async () => (await count(db, "SELECT count(*) AS n FROM jobs")) === 0, 5_000, "backlog drained");
      } finally {
        await p.stop();
      }
    });
  });
}

describe("retention in a running scheduler", () => {
  let tdb: TestDb;
  let rt: Runtime;
  beforeAll(async () => {
    tdb = await freshDb("pglite");
    rt = await startScheduler(tdb.db, { SCHEDULER_RETENTION_INTERVAL: "200ms" });
  });
  afterAll(async () => {
    await rt?.stop();
    await tdb?.close();
  });

  test("the dispatch leader prunes old finished jobs", async () => {
    const old = await finished(tdb.db, "succeeded", 8 * DAY, { attempts: 1 });
    const recent = await finished(tdb.db, "succeeded", 1000);
    await eventually(async () => !(await exists(tdb.db, "jobs", "id", old)), 10_000, "old job pruned");
    expect(await exists(tdb.db, "jobs", "id", recent)).toBe(true);
    expect(rt.dispatcher?.elector.current).toBeDefined();
  });
});
