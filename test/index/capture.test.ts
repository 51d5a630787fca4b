/**
 * Capture of index changes (migration 004): every write that changes what the due index
 * should hold appends an outbox row in its own transaction, while capture is on; claims do
 * not (the dispatcher removes what it claimed); nothing is captured while it is off.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { indexCaptureEnabled, setIndexCapture } from "../../src/index/capture.ts";
import { cancelJob, insertJobs, rescheduleJob } from "../../src/store/jobs.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, newJob } from "../helpers/jobs.ts";

const by = { actor: "test" };

for (const driver of DRIVERS) {
  describe(`index capture (${driver})`, () => {
    let t: TestDb;
    beforeEach(async () => {
      t = await freshDb(driver);
    });
    afterEach(async () => {
      await t.close();
    });

    const outbox = async () =>
      (await t.db.query<{ job_id: string; due_at: Date | null }>("SELECT job_id, due_at FROM index_outbox ORDER BY id")).map((r) => ({
        job: r.job_id,
        due: r.due_at === null ? null : r.due_at.getTime(),
      }));

    test("off by default: job writes leave the outbox empty", async () => {
      expect(await indexCaptureEnabled(t.db)).toBe(false);
      const j = await insertJob(t.db, { due_at: new Date(Date.now() + 60_000) });
      await rescheduleJob(t.db, j.id, null, new Date(Date.now() + 120_000), null, by);
      await cancelJob(t.db, j.id, null, null, by);
      expect(await outbox()).toEqual([]);
    });

    test("on: create, reschedule and cancel each append a row in the same transaction", async () => {
      expect(await setIndexCapture(t.db, true)).toBe(true);
      expect(await setIndexCapture(t.db, true)).toBe(false); // already on
      const due = new Date(Math.floor(Date.now() / 1000) * 1000 + 60_000);
      const j = await insertJob(t.db, { due_at: due });
      const later = new Date(due.getTime() + 30_000);
      await rescheduleJob(t.db, j.id, null, later, null, by);
      await cancelJob(t.db, j.id, null, null, by);
      expect(await outbox()).toEqual([
        { job: j.id, due: due.getTime() },
        { job: j.id, due: later.getTime() },
        { job: j.id, due: null },
      ]);
      // A rolled-back write leaves no row.
      await expect(
        t.db.tx(async (q) => {
          await q.query("UPDATE jobs SET due_at = now() + interval '1 day', status = 'scheduled' WHERE id = $1", [j.id]);
          throw new Error("rollback");
        }),
      ).rejects.toThrow("rollback");
      expect(await outbox()).toHaveLength(3);
    });

    test("on: a claim is not captured; a return to scheduled (retry, reaper) and an expiry are", async () => {
      await setIndexCapture(t.db, true);
      const j = await insertJob(t.db);
      await t.db.query("DELETE FROM index_outbox");
      await t.db.query("UPDATE jobs SET status = 'running', lease_owner = 'w', lease_until = now() + interval '1 minute' WHERE id = $1", [j.id]);
      expect(await outbox()).toEqual([]);
      // Retry: back to scheduled at a later instant.
      await t.db.query("UPDATE jobs SET status = 'scheduled', due_at = now() + interval '5 seconds', lease_owner = NULL WHERE id = $1", [j.id]);
      const [retry] = await outbox();
      expect(retry?.job).toBe(j.id);
      expect(retry?.due).toBeGreaterThan(Date.now());
      // Claimed again, then expired while queued: queued -> expired is no index change.
      await t.db.query("UPDATE jobs SET status = 'queued' WHERE id = $1", [j.id]);
      await t.db.query("UPDATE jobs SET status = 'expired' WHERE id = $1", [j.id]);
      expect(await outbox()).toHaveLength(1);
      // Expired while scheduled: removed.
      const k = await insertJob(t.db, { due_at: new Date(Date.now() + 60_000) });
      await t.db.query("UPDATE jobs SET status = 'expired' WHERE id = $1", [k.id]);
      expect((await outbox()).slice(1)).toEqual([
        { job: k.id, due: expect.any(Number) as unknown as number },
        { job: k.id, due: null },
      ]);
      // Other updates (a lease renewal, a counter) are not captured.
      await t.db.query("UPDATE jobs SET updated_at = now(), calls = calls + 1 WHERE id = $1", [j.id]);
      expect(await outbox()).toHaveLength(3);
    });

    test("on: a held occurrence (due 'infinity') is not captured until it is released", async () => {
      await setIndexCapture(t.db, true);
      const [r] = await insertJobs(t.db, [newJob({ due_at: new Date(Date.now() + 86_400_000) })]);
      await t.db.query("UPDATE jobs SET due_at = 'infinity' WHERE id = $1", [r!.job.id]);
      await t.db.query("DELETE FROM index_outbox");
      await t.db.query("UPDATE jobs SET updated_at = now() WHERE id = $1", [r!.job.id]);
      expect(await outbox()).toEqual([]);
      await t.db.query("UPDATE jobs SET due_at = now() WHERE id = $1", [r!.job.id]);
      expect((await outbox()).map((o) => o.job)).toEqual([r!.job.id]);
    });

    test("turning capture off empties the outbox (nobody relays it any more)", async () => {
      await setIndexCapture(t.db, true);
      await insertJobs(
        t.db,
        Array.from({ length: 30 }, () => newJob({ due_at: new Date(Date.now() + 60_000) })),
      );
      expect(await outbox()).toHaveLength(30);
      expect(await setIndexCapture(t.db, false)).toBe(true);
      expect(await outbox()).toEqual([]);
      await insertJob(t.db);
      expect(await outbox()).toEqual([]);
    });
  });
}
