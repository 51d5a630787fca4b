// Issue 14, hole 8: completion batches could deadlock through the release trigger (each
// finishing occurrence locks its schedule, in the order the batch's jobs are updated), and
// after a few failed writes a batch of outcomes was dropped, so successful calls ran again.
//  1. Two workers' batches forced to reach their schedules in opposite orders (a trigger of
//     the test's stops each batch right after the release trigger locked its first schedule,
//     until the test lets both go): both must be written, no deadlock.
//  2. A running scheduler whose CompleteAttempts fails with an injected deadlock (40P01, the
//     SCHEDULER_TEST_FAULTS seam) five times in a row: no outcome is dropped, every job ends
//     succeeded and its target is called exactly once.
//  3. Outcomes that cannot be written at all: each job is left to its lease, logged with its
//     job id and outcome, never silently.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { withTestFaults } from "../../src/store/test-faults.ts";
import { completeAttempts, type Completion } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { successOf } from "../helpers/completion.ts";
import { insertJob } from "../helpers/jobs.ts";
import { memoryLogger } from "../helpers/log.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

const done = (job_id: string): Completion => successOf({ job_id, gen: 1, attempt_id: Bun.randomUUIDv7() });

describe("two completion batches reaching their schedules in opposite orders (postgres)", () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await freshDb("postgres");
  });
  afterAll(async () => {
    await t?.close();
  });

  test("both batches are written; no deadlock through the release trigger", async () => {
    for (const id of ["S1", "S2"]) {
      await t.db.query(
        `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, catchup_window_ms, overlap, max_queued)
        VALUES ('default', $1, '* * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}', 3, 1000, 1000, 1000, 'fire_once', 86400000, 'queue', 1)`,
        [id],
      );
    }
    // Ids, insertion order and batch order agree, so whichever plan the update takes, worker
    // A's batch reaches S1 then S2, and worker B's S2 then S1.
    const ids = [0, 1, 2, 3].map(() => Bun.randomUUIDv7()).sort();
    const plan = [
      ["A", "S1"],
      ["A", "S2"],
      ["B", "S2"],
      ["B", "S1"],
    ] as const;
    for (const [i, [owner, sid]] of plan.entries()) {
      const nominal = new Date(Date.UTC(2030, 0, 1, 0, i));
      // overlap=queue's occurrences: their finish runs the release, which locks the schedule (029).
      await insertJob(t.db, { id: ids[i], schedule_id: sid, nominal_time: nominal, idempotency_key: `${sid}@${nominal.toISOString()}`, releases_held: true });
      await t.db.query("UPDATE jobs SET status = 'running', lease_owner = $2, lease_generation = 1, lease_until = now() + interval '1 min' WHERE id = $1", [
        ids[i],
        owner,
      ]);
    }
    const [a1, a2, b1, b2] = ids as [string, string, string, string];
    // Each batch must stop right after its first schedule lock. The release trigger takes it
    // when the statement's row triggers fire, after every row is updated, so a lock on a job
    // row cannot stop it there; a trigger of this test's, after the release trigger (names
    // fire in order) on each batch's first job, waits for an advisory lock the test holds.
    await t.db.exec(`CREATE FUNCTION test_pause_after_release() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock_shared(4711); RETURN NULL; END $$`);
    await t.db.exec(`CREATE TRIGGER jobs_zz_test_pause AFTER UPDATE OF status ON jobs FOR EACH ROW
      WHEN (NEW.id IN ('${a1}'::uuid, '${b1}'::uuid)) EXECUTE FUNCTION test_pause_after_release()`);
    const holder = openPostgres({ url: t.url!, maxConnections: 1, applicationName: "test-holder" });
    const workerA = openPostgres({ url: t.url!, maxConnections: 1, applicationName: "worker-a" });
    const workerB = openPostgres({ url: t.url!, maxConnections: 1, applicationName: "worker-b" });
    let writes: Promise<unknown>[] = [];
    try {
      await holder.tx(async (q) => {
        await q.query("SELECT pg_advisory_xact_lock(4711)");
        writes = [
          completeAttempts(workerA, "A", [done(a1), done(a2)]).then(
            (r) => r,
            (e) => e,
          ),
          completeAttempts(workerB, "B", [done(b1), done(b2)]).then(
            (r) => r,
            (e) => e,
          ),
        ];
        // Both wait: each on our lock holding its first schedule (or, with schedules locked
        // up front in key order, one of them on the other's schedule lock).
        await eventually(
          async () =>
            (await t.db.query("SELECT 1 FROM pg_stat_activity WHERE application_name IN ('worker-a', 'worker-b') AND wait_event_type = 'Lock'")).length === 2,
          10_000,
          "both batches waiting",
        );
      });
      // Our commit lets both go on at once: each then wants the schedule the other holds.
    } finally {
      await holder.close();
    }
    const results = await Promise.all(writes);
    await workerA.close();
    await workerB.close();
    for (const r of results) expect((r as { code?: string }).code).toBeUndefined();
    expect((results as { id: string }[][]).map((r) => r.length)).toEqual([2, 2]);
    const statuses = await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = ANY($1::uuid[])", [ids]);
    expect(statuses.map((s) => s.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
  });
});

for (const driver of DRIVERS) {
  describe(`a completion batch that keeps failing (${driver})`, () => {
    let t: TestDb;
    const target = new Target();
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(async () => {
      await t?.close();
      target.stop();
    });

    test("CompleteAttempts deadlocked five times in a row: every outcome is written, each job called exactly once", async () => {
      let faults = 5;
      const db = withTestFaults(t.db, [{ query: "CompleteAttempts", code: "40P01", probability: 1 }], { random: () => (faults-- > 0 ? 0 : 1) });
      const mem = memoryLogger("warn");
      const rt: Runtime = await startScheduler(db, { SCHEDULER_LEASE_TTL: "2s" }, { log: mem.log });
      try {
        const ids: string[] = [];
        for (let i = 0; i < 6; i++) {
          const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/once/${i}` } });
          expect(r.status).toBe(201);
          ids.push(r.body.id);
        }
        await eventually(
          async () => {
            const rows = await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = ANY($1::uuid[])", [ids]);
            return rows.every((r) => r.status === "succeeded");
          },
          20_000,
          "every job succeeded",
        );
        expect(faults).toBeLessThan(0);
        // Long enough for a lease given up on to lapse and its job to be called again.
        await Bun.sleep(3500);
        for (let i = 0; i < 6; i++) expect(target.callsTo(`/once/${i}`)).toHaveLength(1);
        expect(mem.find("outcome not recorded")).toEqual([]);
      } finally {
        await rt.stop();
      }
    });

    test("outcomes that cannot be written at all: each job is left to its lease and logged with its job id", async () => {
      const db = withTestFaults(t.db, [{ query: "CompleteAttempts", code: "55P03", probability: 1 }]);
      const mem = memoryLogger("warn");
      const rt: Runtime = await startScheduler(db, { SCHEDULER_LEASE_TTL: "30s" }, { log: mem.log });
      try {
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) ids.push((await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/never/${i}` } })).body.id);
        const lines = await eventually(
          () => {
            const l = mem.find("outcome not recorded");
            return l.length >= 3 ? l : undefined;
          },
          20_000,
          "a log line per job left to its lease",
        );
        expect(lines.map((l) => l.job_id).sort()).toEqual([...ids].sort());
        for (const l of lines) expect(l).toMatchObject({ level: "error", outcome: "success", code: "55P03" });
        // Still running under its lease: the reaper, not a lost write, decides what happens next.
        const rows = await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = ANY($1::uuid[])", [ids]);
        expect(rows.map((r) => r.status)).toEqual(["running", "running", "running"]);
      } finally {
        await rt.stop().catch(() => {});
        await t.db.query("UPDATE jobs SET status = 'cancelled', lease_owner = NULL WHERE status = 'running'");
      }
    });
  });
}
