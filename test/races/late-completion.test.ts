// A call that reports after the reaper recorded it lost: the lost verdict stays, the real
// outcome is kept beside it, and a late success overrules a reap that left the job dead
// after max_attempts (once, and only while nothing ran since). The interleaving is the
// store's: claim and start as worker A, let the lease lapse, reap, then A's report.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { jobView } from "../../src/api/job-view.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDue, reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { replayDead } from "../../src/store/dlq.ts";
import { listAttempts } from "../../src/store/jobs.ts";
import type { JobRow } from "../../src/store/types.ts";
import { claimQueued, completeAttempts, startAttempts } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { successOf } from "../helpers/completion.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

const LEASE = { ttlMs: 60_000, marginMs: 0 };

const report = successOf;

for (const driver of DRIVERS) {
  describe(`a late completion after a reap (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    /** Queues the job (the only one due) and lets `owner` claim and start it. */
    async function start(owner: string, jobId: string) {
      const h = await takeShards(t.db, "disp");
      expect((await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 })).map((c) => c.id)).toEqual([jobId]);
      const [c] = await claimQueued(t.db, { owner, region: "local", limit: 1, leaseTtlMs: 60_000 });
      expect(c.id).toBe(jobId);
      const [a] = await startAttempts(t.db, owner, "local", [{ id: c.id, gen: c.lease_generation, version: c.version }], LEASE);
      expect(a).toBeDefined();
      return { gen: c.lease_generation, attemptId: a.attempt_id };
    }

    /** The worker stalls past its lease and the reaper takes the job back. */
    async function lapseAndReap(jobId: string) {
      await t.db.query("UPDATE jobs SET lease_until = now() - interval '1 s' WHERE id = $1", [jobId]);
      const reaped = await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(reaped.map((r) => [r.id, r.in_call])).toEqual([[jobId, true]]);
      return reaped[0].now_status;
    }

    const log = async (id: string) => jobView((await jobRow(t.db, id)) as JobRow, await listAttempts(t.db, id)).attempt_log!;

    async function onlyThis(over: Parameters<typeof insertJob>[1]) {
      await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE status IN ('scheduled', 'queued')");
      return insertJob(t.db, over);
    }

    test("a max_attempts reap is overruled by a late success, once; the attempt stays lost with the late outcome beside it", async () => {
      const job = await onlyThis({ max_attempts: 1 });
      const a = await start("A", job.id);
      expect(await lapseAndReap(job.id)).toBe("dead");
      const late = report({ job_id: job.id, gen: a.gen, attempt_id: a.attemptId });
      // Not the lease's completion (the lease is gone), but the call did succeed.
      expect(await completeAttempts(t.db, "A", [late])).toEqual([]);
      const row = await jobRow(t.db, job.id);
      expect([row.status, row.dead_reason, row.tries, row.calls]).toEqual(["succeeded", null, 1, 1]);
      const [entry] = await log(job.id);
      expect(entry).toMatchObject({ outcome: "lost", possibly_delivered: true, late_outcome: "success", late_http_status: 200 });
      expect(entry.late_at).not.toBeNull();
      // The same report again (a retried flush) changes nothing.
      expect(await completeAttempts(t.db, "A", [late])).toEqual([]);
      expect((await log(job.id))[0]).toEqual(entry);
      expect((await jobRow(t.db, job.id)).finished_at).toEqual(row.finished_at);
    });

    test("a late failure after a max_attempts reap: the job stays dead, the failure kept beside the lost verdict", async () => {
      const job = await onlyThis({ max_attempts: 1 });
      const a = await start("A", job.id);
      expect(await lapseAndReap(job.id)).toBe("dead");
      await completeAttempts(t.db, "A", [
        report({
          job_id: job.id,
          gen: a.gen,
          attempt_id: a.attemptId,
          outcome: "transient",
          http_status: 500,
          error: "HTTP 500",
          next_status: "dead",
          dead_reason: "max_attempts",
          last_error: "HTTP 500",
        }),
      ]);
      const row = await jobRow(t.db, job.id);
      expect([row.status, row.dead_reason]).toEqual(["dead", "lease_lost"]);
      expect((await log(job.id))[0]).toMatchObject({ outcome: "lost", late_outcome: "transient", late_http_status: 500 });
    });

    test("a late success after the job ran again and succeeded: one success in the log, the job untouched", async () => {
      const job = await onlyThis({ max_attempts: 3 });
      const a = await start("A", job.id);
      expect(await lapseAndReap(job.id)).toBe("scheduled");
      const b = await start("B", job.id);
      // A reports while B's call is in flight: B's lease and call are not disturbed.
      expect(await completeAttempts(t.db, "A", [report({ job_id: job.id, gen: a.gen, attempt_id: a.attemptId })])).toEqual([]);
      let row = await jobRow(t.db, job.id);
      expect([row.status, row.lease_owner, row.lease_generation]).toEqual(["running", "B", b.gen]);
      expect(await completeAttempts(t.db, "B", [report({ job_id: job.id, gen: b.gen, attempt_id: b.attemptId })])).toHaveLength(1);
      row = await jobRow(t.db, job.id);
      expect([row.status, row.tries]).toEqual(["succeeded", 2]);
      const entries = await log(job.id);
      expect(entries.map((e) => [e.number, e.outcome, e.late_outcome])).toEqual([
        [1, "lost", "success"],
        [2, "success", null],
      ]);
      expect(entries.filter((e) => e.outcome === "success")).toHaveLength(1);
    });

    test("a late success for a dead job replayed since: left as it is (the replay runs it)", async () => {
      const job = await onlyThis({ max_attempts: 1 });
      const a = await start("A", job.id);
      expect(await lapseAndReap(job.id)).toBe("dead");
      const dead = await jobRow(t.db, job.id);
      const replayed = await replayDead(t.db, {
        items: [{ id: job.id, version: dead.version, offsetMs: 0 }],
        paceStepMs: null,
        tenant: null,
        audit: (r) => ({ tenant: r.tenant, actor: "test", action: "dlq.replayed", objectId: r.id, reason: null }),
      });
      expect(replayed).toHaveLength(1);
      await completeAttempts(t.db, "A", [report({ job_id: job.id, gen: a.gen, attempt_id: a.attemptId })]);
      expect((await jobRow(t.db, job.id)).status).toBe("scheduled");
      expect((await log(job.id))[0]).toMatchObject({ outcome: "lost", late_outcome: "success" });
    });
  });
}
