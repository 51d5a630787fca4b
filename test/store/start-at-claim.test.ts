// A claim for a worker in the dispatcher's process is also the pre-call check of up to
// `startLimit` of its jobs (ClaimDueIds): their attempts are opened in the same statement.
// Only jobs that go to their call at once are started, in due order; the rest are claimed
// as before and checked by StartAttempts. A lost reply is undone by the attempt ids.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDueIds } from "../../src/store/dispatch-queries.ts";
import { releaseStartedAtClaim, startAttempts, unstartAtClaim } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

for (const driver of DRIVERS) {
  describe(`a claim that starts its jobs (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    async function claim(ids: string[], startLimit: number, horizonMs = 0) {
      const h = await takeShards(t.db, "disp");
      const attemptIds = ids.map(() => Bun.randomUUIDv7());
      const rows = await claimDueIds(t.db, { fence: h, limit: 100, token: tokenOf(h), ttlMs: 60_000, worker: "w1", ids, attemptIds, startLimit, horizonMs });
      return { rows, attemptIds, byId: new Map(rows.map((r) => [r.id, r])) };
    }

    test("up to startLimit due jobs, oldest first, get their attempt; host limits, a pending verify and not-yet-due jobs do not", async () => {
      const old = await insertJob(t.db, { due_at: new Date(Date.now() - 3000) });
      const mid = await insertJob(t.db, { due_at: new Date(Date.now() - 2000) });
      const late = await insertJob(t.db, { due_at: new Date(Date.now() - 1000) });
      const limited = await insertJob(t.db, { due_at: new Date(Date.now() - 5000), host_limits: { rate: 5 } });
      const verify = await insertJob(t.db, { due_at: new Date(Date.now() - 5000), verify_url: "http://127.0.0.1:9/verify" });
      await t.db.query("UPDATE jobs SET calls = 1 WHERE id = $1", [verify.id]); // a call before: verify first
      const soon = await insertJob(t.db, { due_at: new Date(Date.now() + 30_000) });
      const ids = [old, mid, late, limited, verify, soon].map((j) => j.id);
      const { rows, attemptIds, byId } = await claim(ids, 2, 60_000);
      expect(rows).toHaveLength(6);
      expect(byId.get(old.id)!.attempt_id).toBe(attemptIds[0]);
      expect(byId.get(mid.id)!.attempt_id).toBe(attemptIds[1]);
      for (const j of [late, limited, verify, soon]) expect(byId.get(j.id)!.attempt_id).toBeNull();
      // Started as StartAttempts starts: the call counted, the attempt open under this lease.
      for (const [j, i] of [
        [old, 0],
        [mid, 1],
      ] as const) {
        const c = byId.get(j.id)!;
        expect(c.calls).toBe(1);
        const [a] = await t.db.query<{ job_id: string; number: number; lease_generation: number; worker: string; outcome: string | null }>(
          "SELECT job_id, number, lease_generation, worker, outcome FROM attempts WHERE id = $1",
          [attemptIds[i]],
        );
        expect(a).toEqual({ job_id: j.id, number: 1, lease_generation: c.lease_generation, worker: "w1", outcome: null });
      }
      expect(byId.get(late.id)!.calls).toBe(0);
      // The ones not started are checked as before: `late` passes its check now.
      const checked = await startAttempts(t.db, "w1", "local", [{ id: late.id, gen: byId.get(late.id)!.lease_generation, version: 1 }], {
        ttlMs: 60_000,
        marginMs: 0,
      });
      expect(checked.map((s) => s.number)).toEqual([1]);
    });

    test("attempt ids go to the started jobs in due order, whatever the order of the ids; no more start than there are attempt ids", async () => {
      const first = await insertJob(t.db, { due_at: new Date(Date.now() - 3000) });
      const second = await insertJob(t.db, { due_at: new Date(Date.now() - 2000) });
      const third = await insertJob(t.db, { due_at: new Date(Date.now() - 1000) });
      const h = await takeShards(t.db, "disp");
      // The candidates newest first, a start limit of 3, but only two attempt ids.
      const attemptIds = [Bun.randomUUIDv7(), Bun.randomUUIDv7()];
      const ids = [third.id, second.id, first.id];
      const rows = await claimDueIds(t.db, { fence: h, limit: 100, token: tokenOf(h), ttlMs: 60_000, worker: "w1", ids, attemptIds, startLimit: 3 });
      const byId = new Map(rows.map((r) => [r.id, r]));
      expect(rows).toHaveLength(3);
      expect([first, second, third].map((j) => byId.get(j.id)!.attempt_id)).toEqual([attemptIds[0], attemptIds[1], null]);
      expect([first, second, third].map((j) => byId.get(j.id)!.calls)).toEqual([1, 1, 0]);
      const opened = await t.db.query<{ id: string; job_id: string }>("SELECT id, job_id FROM attempts WHERE id = ANY($1::uuid[])", [attemptIds]);
      expect(new Map(opened.map((a) => [a.id, a.job_id]))).toEqual(
        new Map([
          [attemptIds[0]!, first.id],
          [attemptIds[1]!, second.id],
        ]),
      );
    });

    test("without a start limit (or for the queue) nothing is started", async () => {
      const j = await insertJob(t.db);
      const { rows } = await claim([j.id], 0);
      expect(rows.map((r) => [r.id, r.attempt_id, r.calls])).toEqual([[j.id, null, 0]]);
    });

    test("unstarted (its host is not ready): the attempt is taken back, the job stays claimed, and its check opens attempt 1", async () => {
      const j = await insertJob(t.db);
      const { attemptIds, byId } = await claim([j.id], 1);
      const c = byId.get(j.id)!;
      expect(c.attempt_id).toBe(attemptIds[0]);
      // Another worker's statement takes back nothing.
      expect(await unstartAtClaim(t.db, "w2", [{ id: j.id, gen: c.lease_generation, attemptId: c.attempt_id! }])).toEqual([]);
      expect(await unstartAtClaim(t.db, "w1", [{ id: j.id, gen: c.lease_generation, attemptId: c.attempt_id! }])).toEqual([{ id: j.id }]);
      const row = await jobRow(t.db, j.id);
      expect([row.status, row.lease_owner, row.lease_generation, row.calls]).toEqual(["running", "w1", c.lease_generation, 0]);
      const [n] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts WHERE job_id = $1", [j.id]);
      expect(Number(n.n)).toBe(0);
      const checked = await startAttempts(t.db, "w1", "local", [{ id: j.id, gen: c.lease_generation, version: c.version }], { ttlMs: 60_000, marginMs: 0 });
      expect(checked.map((s) => s.number)).toEqual([1]);
    });

    test("a lost reply: the jobs the claim started are given back uncalled, their attempts deleted, no call counted", async () => {
      const a = await insertJob(t.db);
      const b = await insertJob(t.db);
      const ids = [a.id, b.id];
      const { attemptIds, byId } = await claim(ids, 10);
      expect([...byId.values()].every((r) => r.attempt_id !== null)).toBe(true);
      // The worker never saw the reply: all it has is the ids it sent.
      const back = await releaseStartedAtClaim(t.db, "w1", ids, attemptIds);
      expect(back.map((r) => r.id).sort()).toEqual([...ids].sort());
      for (const id of ids) {
        const row = await jobRow(t.db, id);
        expect([row.status, row.calls, row.tries]).toEqual(["scheduled", 0, 0]);
      }
      const [n] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts WHERE id = ANY($1::uuid[])", [attemptIds]);
      expect(Number(n.n)).toBe(0);
      // Another worker's lost claim gives back nothing of w1's.
      expect(await releaseStartedAtClaim(t.db, "w2", ids, attemptIds)).toEqual([]);
    });
  });
}
