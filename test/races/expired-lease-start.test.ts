// Issue 14, hole 4: a call must never start, or go on, on a job lease that may have lapsed.
// Each test forces its interleaving: a stop-the-world pause of the worker's process inside
// the beforeStart seam, an advisory lock held by the test's own connection that stops the
// reaper mid-statement, a trigger that makes every renewal throw a real SQLSTATE.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDue, reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { claimQueued, startAttempts } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { afterAPass, api, startScheduler } from "../helpers/scheduler.ts";
import { releaseTestShards, takeShards, tokenOf } from "../helpers/shards.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`a worker stalled past its lease (${driver})`, () => {
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

    test("a lease that lapsed before the pre-call check: that claim never calls; the job is called once, under a later claim", async () => {
      let stalled: { gen: number; leaseUntil: number } | undefined;
      const rt = await startScheduler(
        t.db,
        { SCHEDULER_LEASE_TTL: "1s", SCHEDULER_CLOCK_SKEW: "500ms" },
        {
          beforeStart: async (jobs) => {
            const j = jobs.find((x) => x.target.url.endsWith("/stall"));
            if (!j || stalled) return;
            // A claim returns no lease_until (CLAIMED_COLUMNS): read it off the row.
            const [row] = await t.db.query<{ lease_until: Date }>("SELECT lease_until FROM jobs WHERE id = $1", [j.id]);
            stalled = { gen: j.lease_generation, leaseUntil: row.lease_until.getTime() };
            // A stop-the-world pause of the whole process (a long GC, SIGSTOP): the renewer
            // stops too. It ends once the lease has lapsed by the database's clock (the same
            // machine's), plus a little.
            Bun.sleepSync(Math.max(0, stalled.leaseUntil + 200 - Date.now()));
          },
        },
      );
      try {
        const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/stall` } })).body;
        const final = await eventually(
          async () => {
            const x = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
            return x.status === "succeeded" ? x : undefined;
          },
          10_000,
          "succeeded",
        );
        expect(stalled).toBeDefined();
        await afterAPass([rt]);
        expect(target.callsTo("/stall")).toHaveLength(1);
        expect(final.attempt_log).toHaveLength(1);
        const attempts = await t.db.query<{ lease_generation: number; outcome: string }>(
          "SELECT lease_generation, outcome FROM attempts WHERE job_id = $1 ORDER BY number",
          [j.id],
        );
        // The stalled claim opened no attempt: the one call came from a later claim.
        expect(attempts).toHaveLength(1);
        expect(attempts[0].lease_generation).toBeGreaterThan(stalled!.gen);
        expect(attempts[0].outcome).toBe("success");
      } finally {
        await rt.stop();
      }
    });
  });
}

describe("the reaper and the pre-call check under any interleaving (postgres)", () => {
  let t: TestDb;
  let admin: postgres.Sql;
  beforeAll(async () => {
    t = await freshDb("postgres");
    await seedAuthority(t.db, "local");
    admin = postgres(t.url!, { max: 2, onnotice: () => {} });
  });
  afterAll(async () => {
    await admin?.end();
    await t?.close();
  });

  /** Backends of this database waiting for a lock of this kind ('advisory', 'transactionid', 'tuple'). */
  async function waiting(kinds: string[]): Promise<number> {
    const [r] = await admin<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = ANY(${kinds})`;
    return r.n;
  }

  test("StartAttempts committing between the reaper's snapshot and its row lock: no attempt left open, no phantom try", async () => {
    // Two running jobs of worker A, both past their lease: P (the gate) lapsed first, so the
    // reaper takes it first; X is the job whose pre-call check races the reaper.
    const p = await insertJob(t.db, { tenant: "gate" });
    const x = await insertJob(t.db, { max_attempts: 5 });
    const h = await takeShards(t.db, "disp");
    expect(await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 })).toHaveLength(2);
    const claimed = await claimQueued(t.db, { owner: "A", region: "local", limit: 2, leaseTtlMs: 60_000 });
    expect(claimed).toHaveLength(2);
    const xa = claimed.find((c) => c.id === x.id)!;
    await t.db.query("UPDATE jobs SET lease_until = now() - interval '10 s' WHERE id = $1", [p.id]);
    await t.db.query("UPDATE jobs SET lease_until = now() - interval '5 s' WHERE id = $1", [x.id]);
    // The reaper stops when it writes P (its snapshot taken, X not yet reached) for as long
    // as the test holds advisory lock 4242 on its own connection.
    await t.db.exec(`
      CREATE FUNCTION test_reap_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$;
      CREATE TRIGGER test_reap_gate BEFORE UPDATE ON jobs FOR EACH ROW
        WHEN (OLD.tenant = 'gate' AND OLD.status = 'running' AND NEW.status <> 'running')
        EXECUTE FUNCTION test_reap_gate();`);
    const gate = await admin.reserve();
    try {
      await gate`SELECT pg_advisory_lock(4242)`;
      const reap = reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      await eventually(async () => (await waiting(["advisory"])) === 1, 5000, "the reaper stopped at the gate");
      // A's pre-call check for X now: it either commits (X not locked by the reaper yet) or
      // waits for the reaper's lock on X. Either way the gate opens only after that.
      let startDone = false;
      const start = startAttempts(t.db, "A", "local", [{ id: xa.id, gen: xa.lease_generation, version: xa.version }], { ttlMs: 60_000, marginMs: 0 }).finally(
        () => (startDone = true),
      );
      await eventually(async () => startDone || (await waiting(["transactionid", "tuple"])) > 0, 5000, "the pre-call check committed or waits for the reaper");
      await gate`SELECT pg_advisory_unlock(4242)`;
      const [reaped, started] = await Promise.all([reap, start]);
      expect(reaped.map((r) => r.id).sort()).toEqual([p.id, x.id].sort());

      // No attempt is left open on a job that is no longer running, and every try counted
      // is a call recorded (lost).
      const open = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.outcome IS NULL AND j.status <> 'running'",
      );
      expect(open[0].n).toBe(0);
      const lost = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE job_id = $1 AND outcome = 'lost'", [x.id]);
      let row = await jobRow(t.db, x.id);
      expect(row.status).toBe("scheduled");
      expect(row.tries).toBe(lost[0].n);
      expect(lost[0].n).toBe(started.length);

      // The next claim of X makes no call and is reaped: it costs no try (a phantom open
      // attempt from the race would be counted again here).
      await t.db.exec("DROP TRIGGER test_reap_gate ON jobs");
      await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE id = $1", [p.id]);
      expect(await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 })).toHaveLength(1);
      const [again] = await claimQueued(t.db, { owner: "B", region: "local", limit: 1, leaseTtlMs: 60_000 });
      expect(again.id).toBe(x.id);
      await t.db.query("UPDATE jobs SET lease_until = now() - interval '1 s' WHERE id = $1", [x.id]);
      const second = await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(second.map((r) => [r.id, r.in_call])).toEqual([[x.id, false]]);
      row = await jobRow(t.db, x.id);
      expect([row.status, row.tries]).toEqual(["scheduled", lost[0].n]);
    } finally {
      gate.release();
      await t.db.exec("DROP TRIGGER IF EXISTS test_reap_gate ON jobs; DROP FUNCTION IF EXISTS test_reap_gate()");
      await releaseTestShards(t.db);
    }
  });

  test("a pre-call check whose commit is delayed past its lease, committing between the reaper's snapshot and its lock: the reap sees the attempt", async () => {
    // The check passes on a live lease (and extends it), but its commit stalls (think of a
    // synchronous standby gone quiet) until that lease has lapsed after all.
    await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE status IN ('scheduled', 'queued', 'running')");
    const p = await insertJob(t.db, { tenant: "gate" });
    const x = await insertJob(t.db, { max_attempts: 5 });
    const h = await takeShards(t.db, "disp");
    expect(await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 })).toHaveLength(2);
    const claimed = await claimQueued(t.db, { owner: "A", region: "local", limit: 2, leaseTtlMs: 60_000 });
    const xa = claimed.find((c) => c.id === x.id)!;
    await t.db.query("UPDATE jobs SET lease_until = now() - interval '10 s' WHERE id = $1", [p.id]);
    await t.db.query("UPDATE jobs SET lease_until = now() + interval '500 ms' WHERE id = $1", [x.id]);
    await t.db.exec(`
      CREATE FUNCTION test_reap_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$;
      CREATE TRIGGER test_reap_gate BEFORE UPDATE ON jobs FOR EACH ROW
        WHEN (OLD.tenant = 'gate' AND OLD.status = 'running' AND NEW.status <> 'running')
        EXECUTE FUNCTION test_reap_gate();
      CREATE FUNCTION test_commit_gate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        PERFORM pg_advisory_xact_lock_shared(4243); RETURN NEW; END $$;
      CREATE TRIGGER test_commit_gate AFTER INSERT ON attempts FOR EACH ROW
        WHEN (NEW.job_id = '${x.id}') EXECUTE FUNCTION test_commit_gate();`);
    const gate = await admin.reserve();
    try {
      await gate`SELECT pg_advisory_lock(4242)`;
      await gate`SELECT pg_advisory_lock(4243)`;
      const start = startAttempts(t.db, "A", "local", [{ id: xa.id, gen: xa.lease_generation, version: xa.version }], { ttlMs: 200, marginMs: 0 });
      await eventually(async () => (await waiting(["advisory"])) === 1, 5000, "the pre-call check stalled before its commit");
      const checkedBy = Date.now();
      // The lease (500 ms from just before the check, which kept it) has lapsed, with room.
      await Bun.sleep(Math.max(0, checkedBy + 800 - Date.now()));
      const reap = reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      await eventually(async () => (await waiting(["advisory"])) === 2, 5000, "the reaper stopped at the gate");
      await gate`SELECT pg_advisory_unlock(4243)`;
      expect(await start).toHaveLength(1);
      await gate`SELECT pg_advisory_unlock(4242)`;
      await reap;
      // The attempt is open only while its job still runs; a reap of X records it lost.
      const open = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.outcome IS NULL AND j.status <> 'running'",
      );
      expect(open[0].n).toBe(0);
      await t.db.exec("DROP TRIGGER test_reap_gate ON jobs; DROP TRIGGER test_commit_gate ON attempts");
      await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      const row = await jobRow(t.db, x.id);
      const [a] = await t.db.query<{ outcome: string }>("SELECT outcome FROM attempts WHERE job_id = $1", [x.id]);
      expect([row.status, row.tries, a.outcome]).toEqual(["scheduled", 1, "lost"]);
    } finally {
      gate.release();
      await t.db.exec("DROP TRIGGER IF EXISTS test_reap_gate ON jobs; DROP TRIGGER IF EXISTS test_commit_gate ON attempts");
      await t.db.exec("DROP FUNCTION IF EXISTS test_reap_gate(); DROP FUNCTION IF EXISTS test_commit_gate()");
      await releaseTestShards(t.db);
    }
  });

  test("renewals that throw for longer than the TTL less the skew margin abort the call in flight", async () => {
    // A target that holds the first call until the caller gives up (or 8 s), the second
    // answers at once.
    let abortedAt: number | undefined;
    let calls = 0;
    let calledAt = 0;
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (req) => {
        if (++calls > 1) return new Response("ok");
        calledAt = Date.now();
        return new Promise<Response>((resolve) => {
          req.signal.addEventListener("abort", () => {
            abortedAt = Date.now();
            resolve(new Response("gone"));
          });
          setTimeout(() => resolve(new Response("ok")), 8000);
        });
      },
    });
    // TTL 1.5 s, margin 0.5 s: a lease unrenewed for 1 s is given up; the reaper waits
    // until 2 s past the last renewal.
    const rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "1500ms", SCHEDULER_CLOCK_SKEW: "500ms" });
    let installedAt = 0;
    try {
      const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `http://127.0.0.1:${server.port}/hold` }, timeout: "10s" })).body;
      await eventually(() => calls >= 1, 5000, "the call started");
      // From now on every renewal of this job throws (a real RAISE, SQLSTATE P0001).
      await t.db.exec(`
        CREATE FUNCTION test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          RAISE EXCEPTION 'renewal refused by the test'; END $$;
        CREATE TRIGGER test_refuse_renewal BEFORE UPDATE ON jobs FOR EACH ROW
          WHEN (OLD.id = '${j.id}' AND OLD.status = 'running' AND NEW.status = 'running' AND NEW.lease_until IS DISTINCT FROM OLD.lease_until)
          EXECUTE FUNCTION test_refuse_renewal();`);
      installedAt = Date.now();
      await eventually(() => abortedAt !== undefined, 5000, "the call aborted");
      // Within the trust period (1 s) after the last renewal that went through, which came
      // before the trigger; some slack for a loaded machine.
      expect(abortedAt! - installedAt).toBeLessThan(1800);
      expect(abortedAt! - calledAt).toBeGreaterThan(500);
      await t.db.exec("DROP TRIGGER test_refuse_renewal ON jobs");
      const final = await eventually(
        async () => {
          const x = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
          return x.status === "succeeded" ? x : undefined;
        },
        10_000,
        "succeeded",
      );
      // The aborted call is the worker's own verdict (no try used up), not the reaper's.
      expect(final.attempt_log[0]).toMatchObject({ outcome: "unknown", error: "call aborted: the lease was lost" });
      expect(final.attempt_log).toHaveLength(2);
      expect((await jobRow(t.db, j.id)).tries).toBe(1);
    } finally {
      await t.db.exec("DROP TRIGGER IF EXISTS test_refuse_renewal ON jobs");
      await rt.stop();
      server.stop(true);
    }
  });
});
