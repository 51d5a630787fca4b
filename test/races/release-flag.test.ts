// Only an occurrence that a held one may wait behind runs the release when it finishes (029):
// the release trigger locked the schedule and ran two lookups for every occurrence of every
// schedule, a fifth of an occurrence's delivery in the database. Only overlap=queue holds
// occurrences back. These tests pin down who carries the flag, and force the ways an
// occurrence can come to have a held one behind it without having been made under
// overlap=queue: the schedule changed to queue while it was in progress, a replay, a manual run.
import { describe, expect, test } from "bun:test";
import { replayDead } from "../../src/store/dlq.ts";
import { insertJobsIn, transactionNow } from "../../src/store/jobs.ts";
import { migrate } from "../../src/store/migrate.ts";
import { triggeredJob } from "../../src/store/new-job.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { fieldsOf, getSchedule, insertSchedule, type Overlap, updateSchedule } from "../../src/store/schedules.ts";
import { createDatabase, DRIVERS, describeDb, dropDatabase, migrateBefore } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { completeAttempts } from "../../src/store/worker-queries.ts";
import { successOf } from "../helpers/completion.ts";
import { dbJobs, generationPass, iso, scheduleFields } from "../schedules/gen-support.ts";

const HOUR = 3_600_000;

for (const driver of DRIVERS) {
  describe(`the release of held occurrences, by flag (${driver})`, () => {
    const t = describeDb(driver);

    const pass = () => generationPass(t.db);
    const by = { actor: "test", reason: null };

    /** An hourly schedule due at the last full hour, with two hours of grace. */
    async function schedule(id: string, overlap: Overlap): Promise<number> {
      const f = scheduleFields(id, {
        cron: "0 0 * * * *",
        misfire: "skip",
        misfire_grace_ms: 2 * HOUR,
        overlap,
        max_queued: 1,
        next_fire_at: new Date(Math.floor(Date.now() / HOUR) * HOUR),
      });
      return (await insertSchedule(t.db, f, by))!.next_fire_at!.getTime();
    }

    const flags = async (id: string) =>
      (
        await t.db.query<{ id: string; releases_held: boolean }>(
          "SELECT id::text AS id, releases_held FROM jobs WHERE schedule_id = $1 ORDER BY nominal_time",
          [id],
        )
      ).map((r) => r.releases_held);

    /**
     * A schedule's first occurrence becomes the hour before and stays in progress (running);
     * `meanwhile` runs; then the hour comes due again and a pass generates behind it.
     */
    async function behindRunning(id: string, overlap: Overlap, meanwhile?: () => Promise<void>): Promise<string> {
      const hour = await schedule(id, overlap);
      await pass();
      const [j1] = await dbJobs(t.db, id);
      await t.db.query(
        `UPDATE jobs SET nominal_time = $2, idempotency_key = $3, status = 'running', lease_owner = 'w', lease_until = now() + interval '1 h',
           lease_generation = lease_generation + 1, calls = 1 WHERE id = $1`,
        [j1!.id, new Date(hour - HOUR), `${id}@${iso(hour - HOUR)}`],
      );
      await t.db.query("UPDATE schedules SET next_fire_at = $2 WHERE id = $1", [id, new Date(hour)]);
      await meanwhile?.();
      await pass();
      return j1!.id;
    }

    const changeOverlap = async (id: string, overlap: Overlap) => {
      const r = await updateSchedule(t.db, "default", id, null, { ...by, action: "schedule.updated" }, (cur) => ({ ...fieldsOf(cur), overlap }));
      expect(r.kind).toBe("updated");
    };

    const finish = (jobId: string) =>
      t.db.query("UPDATE jobs SET status = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL WHERE id = $1", [jobId]);

    test("only overlap=queue's occurrences carry the flag; a manual run always does", async () => {
      for (const o of ["allow", "skip", "queue"] as const) await schedule(`flag-${o}`, o);
      await pass();
      expect(await flags("flag-allow")).toEqual([false]);
      expect(await flags("flag-skip")).toEqual([false]);
      expect(await flags("flag-queue")).toEqual([true]);
      const s = (await getSchedule(t.db, "default", "flag-allow"))!;
      await t.db.tx(async (q) => insertJobsIn(q, [triggeredJob(s, await transactionNow(q))]));
      expect(await flags("flag-allow")).toEqual([false, true]);
      // A job of no schedule never runs the release.
      const [plain] = await t.db.tx((q) => insertJobsIn(q, [newJob()]));
      expect(plain.job.releases_held).toBe(false);
    });

    test("overlap=queue: the held occurrence starts as soon as the one before finishes", async () => {
      const before = await behindRunning("q-plain", "queue");
      const [, held] = await dbJobs(t.db, "q-plain");
      expect({ status: held!.status, due: held!.due }).toEqual({ status: "scheduled", due: null }); // 'infinity': held
      await finish(before);
      const [, released] = await dbJobs(t.db, "q-plain");
      expect(released!.due).not.toBeNull();
    });

    test("changed from allow to queue while an occurrence runs: that occurrence is flagged, and the one held behind it is released when it finishes", async () => {
      const before = await behindRunning("to-queue", "allow", async () => {
        expect(await flags("to-queue")).toEqual([false]);
        await changeOverlap("to-queue", "queue");
        expect(await flags("to-queue")).toEqual([true]);
      });
      const jobs = await dbJobs(t.db, "to-queue");
      expect(jobs.map((j) => [j.status, j.due === null])).toEqual([
        ["running", false],
        ["scheduled", true],
      ]);
      // Not flagged, the held one would wait for the generator's backstop, an hour later.
      await finish(before);
      const [, released] = await dbJobs(t.db, "to-queue");
      expect(released!.due).not.toBeNull();
    });

    test("changed from queue to allow with one held: it is due at once, since new occurrences under allow would never release it", async () => {
      await behindRunning("to-allow", "queue");
      expect((await dbJobs(t.db, "to-allow")).map((j) => j.due === null)).toEqual([false, true]);
      await changeOverlap("to-allow", "allow");
      const jobs = await dbJobs(t.db, "to-allow");
      expect(jobs.map((j) => [j.status, j.due === null])).toEqual([
        ["running", false],
        ["scheduled", false],
      ]);
      // Released now: it may start at once, within its grace counted from the release.
      expect(jobs[1]!.due!).toBeLessThanOrEqual(Date.now() + 1000);
    });

    test("a replayed occurrence is flagged whatever its schedule's policy was", async () => {
      await schedule("replayed", "allow");
      await pass();
      const [j] = await dbJobs(t.db, "replayed");
      await t.db.query("UPDATE jobs SET status = 'dead', dead_reason = 'attempts_exhausted', finished_at = now() WHERE id = $1", [j!.id]);
      const [{ version }] = await t.db.query<{ version: number }>("SELECT version FROM jobs WHERE id = $1", [j!.id]);
      const rows = await replayDead(t.db, {
        items: [{ id: j!.id, version: Number(version), offsetMs: 0 }],
        paceStepMs: null,
        tenant: null,
        audit: (row) => ({ actor: "test", tenant: row.tenant, action: "dlq.replayed", objectId: row.id, reason: null }),
      });
      expect(rows.map((r) => [r.status, r.releases_held])).toEqual([["scheduled", true]]);
    });
  });
}

describe("only a flagged occurrence's finish takes its schedule's lock (postgres)", () => {
  const t = describeDb("postgres");

  /**
   * An occurrence of a skip schedule (unflagged) and one of a queue schedule (flagged), both
   * running, and another transaction holding both schedules' rows (as the generator does while
   * it decides) until `release` is called.
   */
  async function twoUnderLock(prefix: string) {
    const ids = [`${prefix}-skip`, `${prefix}-queue`];
    for (const [id, overlap] of [
      [ids[0]!, "skip"],
      [ids[1]!, "queue"],
    ] as const)
      await insertSchedule(t.db, scheduleFields(id, { overlap, next_fire_at: new Date(Date.now() + HOUR) }), { actor: "test", reason: null });
    const job = (id: string, releases_held: boolean) =>
      newJob({ schedule_id: id, nominal_time: new Date(), idempotency_key: `${id}@${new Date().toISOString()}`, releases_held });
    const [plain, flagged] = [job(ids[0]!, false), job(ids[1]!, true)];
    await t.db.tx((q) => insertJobsIn(q, [plain, flagged]));
    await t.db.query(
      "UPDATE jobs SET status = 'running', lease_owner = 'w', lease_generation = 1, lease_until = now() + interval '1 min' WHERE id = ANY($1::uuid[])",
      [[plain.id, flagged.id]],
    );
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = t.db.tx(async (q) => {
      await q.query("SELECT 1 FROM schedules WHERE id = ANY($1::text[]) FOR UPDATE", [ids]);
      locked();
      await held;
    });
    await isLocked;
    return {
      plain: plain.id,
      flagged: flagged.id,
      release: async () => {
        release();
        await holder;
      },
    };
  }

  const within = <T>(p: Promise<T>, ms: number) => Promise.race([p, Bun.sleep(ms).then(() => "still waiting" as const)]);

  test("the release trigger: finishing an unflagged occurrence does not wait for the lock; a flagged one does", async () => {
    const x = await twoUnderLock("trig");
    const finishWithin = (id: string) =>
      t.db.tx(async (q) => {
        await q.query("SET LOCAL lock_timeout = '1s'");
        await q.query("UPDATE jobs SET status = 'succeeded', finished_at = now() WHERE id = $1", [id]);
      });
    try {
      await finishWithin(x.plain);
      await expect(finishWithin(x.flagged)).rejects.toThrow(/lock timeout/);
    } finally {
      await x.release();
    }
    await finishWithin(x.flagged);
    const rows = await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = ANY($1::uuid[])", [[x.plain, x.flagged]]);
    expect(rows.map((r) => r.status)).toEqual(["succeeded", "succeeded"]);
  });

  test("a completion batch: an unflagged occurrence's outcome is written under the lock; a flagged one's waits for it", async () => {
    const x = await twoUnderLock("batch");
    const done = (job_id: string) => successOf({ job_id, gen: 1, attempt_id: Bun.randomUUIDv7() });
    let queued: Promise<unknown> | undefined;
    try {
      expect(await within(completeAttempts(t.db, "w", [done(x.plain)]), 5000)).toEqual([{ id: x.plain, status: "succeeded" }]);
      queued = completeAttempts(t.db, "w", [done(x.flagged)]);
      expect(await within(queued, 500)).toBe("still waiting");
    } finally {
      await x.release();
    }
    expect(await queued).toEqual([{ id: x.flagged, status: "succeeded" }]);
  });
});

describe("029 on a database with occurrences (postgres)", () => {
  test("occurrences in progress keep the release; finished ones and plain jobs do not need it; one held under allow is due now", async () => {
    const url = await createDatabase();
    const db = openPostgres({ url, maxConnections: 2 });
    try {
      await migrateBefore(db, 29);
      await db.query(
        `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, catchup_window_ms, overlap)
         VALUES ('default', 's1', '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x"}', 3, 1000, 60000, 5000, 'skip', 0, 'queue'),
                ('default', 's2', '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x"}', 3, 1000, 60000, 5000, 'skip', 0, 'allow')`,
      );
      const rows: [string, string, string | null][] = [
        [crypto.randomUUID(), "running", "s1"],
        [crypto.randomUUID(), "scheduled", "s1"],
        [crypto.randomUUID(), "succeeded", "s1"],
        [crypto.randomUUID(), "running", null],
        [crypto.randomUUID(), "scheduled", "s2"],
      ];
      await db.query(
        `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, schedule_id, nominal_time)
         SELECT x.id, 'default', x.status, now(), now(), '{"url":"http://127.0.0.1:9/x"}', 3, 1000, 60000, 5000, x.schedule_id,
                CASE WHEN x.schedule_id IS NOT NULL THEN now() - make_interval(mins => x.n::int) END
         FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS x(id, status, schedule_id, n)`,
        [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])],
      );
      // Held: the second of s1 (queue, behind the running one) and the one of s2 (changed to allow since).
      await db.query("UPDATE jobs SET due_at = 'infinity' WHERE id = ANY($1::uuid[])", [[rows[1][0], rows[4][0]]]);
      expect((await migrate(db)).applied).toContain("029_release_flag");
      const got = await db.query<{ id: string; releases_held: boolean; held: boolean }>(
        "SELECT id::text AS id, releases_held, due_at = 'infinity' AS held FROM jobs",
      );
      const byId = new Map(got.map((r) => [r.id, [r.releases_held, r.held]]));
      expect(rows.map((r) => byId.get(r[0]))).toEqual([
        [true, false],
        [true, true],
        [false, false],
        [false, false],
        [true, false],
      ]);
    } finally {
      await db.close();
      await dropDatabase(url);
    }
  });
});
