// The failure signature recorded where jobs become dead: the worker's completion and the lease
// reaper. The quarantine count (dead_streak) rises only for the same signature twice in a row.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { replayDead } from "../../src/store/dlq.ts";
import { completeAttempts, type Completion } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { row } from "./support.ts";

for (const driver of DRIVERS) {
  describe(`failure signature at death (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(async () => {
      await t?.close();
    });

    /** The job as a worker holds it mid-call on its last try: running, leased, an open attempt. */
    const inCall = async (id: string, opts: { leaseGone?: boolean; cancel?: boolean } = {}) => {
      const j = await row(t.db, id);
      const attemptId = crypto.randomUUID();
      await t.db.query(
        `UPDATE jobs SET status = 'running', lease_owner = 'W', lease_generation = lease_generation + 1, calls = calls + 1,
           tries = max_attempts - 1, cancel_requested = $2,
           lease_until = CASE WHEN $3 THEN now() - interval '1 minute' ELSE now() + interval '1 minute' END WHERE id = $1`,
        [id, opts.cancel ?? false, opts.leaseGone ?? false],
      );
      await t.db.query("INSERT INTO attempts (id, job_id, number, lease_generation, worker, started_at) VALUES ($1, $2, $3, $4, 'W', now())", [
        attemptId,
        id,
        j.calls + 1,
        j.lease_generation + 1,
      ]);
      return { gen: j.lease_generation + 1, attemptId };
    };
    const fail = (id: string, gen: number, attemptId: string, http: number | null, outcome: string, deadReason: string): Completion => ({
      job_id: id,
      gen,
      attempt_id: attemptId,
      outcome,
      http_status: http,
      error: "x",
      possibly_delivered: false,
      started_at: new Date(),
      finished_at: new Date(),
      next_status: "dead",
      next_delay_ms: null,
      last_error: "x",
      counts_try: true,
      throttle_until: null,
      dead_reason: deadReason,
    });
    const replay = async (id: string) => {
      const j = await row(t.db, id);
      const [r] = await replayDead(t.db, {
        items: [{ id, version: j.version, offsetMs: 0 }],
        paceStepMs: null,
        tenant: null,
        audit: (x) => ({ actor: "test", tenant: x.tenant, action: "dlq.replayed", objectId: x.id, reason: null }),
      });
      expect(r.status).toBe("scheduled");
    };

    test("the worker's dead transition records <dead_reason>:<http status or outcome>; the same one again counts up, another starts at 1", async () => {
      const id = (await insertJob(t.db, { max_attempts: 2 })).id;
      let c = await inCall(id);
      expect(await completeAttempts(t.db, "W", [fail(id, c.gen, c.attemptId, 400, "permanent", "permanent")])).toHaveLength(1);
      expect(await row(t.db, id)).toMatchObject({ status: "dead", dead_signature: "permanent:400", dead_streak: 1 });
      await replay(id);
      c = await inCall(id);
      await completeAttempts(t.db, "W", [fail(id, c.gen, c.attemptId, 400, "permanent", "permanent")]);
      expect(await row(t.db, id)).toMatchObject({ status: "dead", dead_signature: "permanent:400", dead_streak: 2, replays: 1 });
      await replay(id);
      c = await inCall(id);
      await completeAttempts(t.db, "W", [fail(id, c.gen, c.attemptId, null, "unknown", "max_attempts")]);
      expect(await row(t.db, id)).toMatchObject({ status: "dead", dead_signature: "max_attempts:unknown", dead_streak: 1, replays: 2 });
      // A cancel wins over the death: no signature is recorded.
      await replay(id);
      c = await inCall(id, { cancel: true });
      await completeAttempts(t.db, "W", [fail(id, c.gen, c.attemptId, null, "unknown", "max_attempts")]);
      expect(await row(t.db, id)).toMatchObject({ status: "cancelled", dead_signature: "max_attempts:unknown", dead_streak: 1 });
    });

    test("the reaper's dead transition (lease lost on the last try) records lease_lost:lost", async () => {
      const id = (await insertJob(t.db, { max_attempts: 1 })).id;
      await inCall(id, { leaseGone: true });
      const reaped = await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(reaped.map((r) => [r.id, r.now_status])).toEqual([[id, "dead"]]);
      expect(await row(t.db, id)).toMatchObject({ dead_reason: "lease_lost", dead_signature: "lease_lost:lost", dead_streak: 1 });
      await replay(id);
      await inCall(id, { leaseGone: true });
      await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(await row(t.db, id)).toMatchObject({ status: "dead", dead_signature: "lease_lost:lost", dead_streak: 2 });
    });
  });
}
