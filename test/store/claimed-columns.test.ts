// A claim returns exactly the columns a call needs (CLAIMED_COLUMNS), in every claim
// statement: a column the worker starts to read but a claim does not return would be
// `undefined` at the call (tsc sees the type, not the SQL), so the SQL is checked here.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDue, claimDueIds } from "../../src/store/dispatch-queries.ts";
import { CLAIMED_COLUMNS } from "../../src/store/types.ts";
import { claimQueued } from "../../src/store/worker-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

for (const driver of DRIVERS) {
  describe(`claimed columns (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    test("ClaimDue, ClaimDueIds and ClaimQueued return CLAIMED_COLUMNS and nothing else", async () => {
      const a = await insertJob(t.db);
      const b = await insertJob(t.db);
      const h = await takeShards(t.db, "disp");
      const p = { fence: h, limit: 1, token: tokenOf(h), ttlMs: 60_000 };
      const [byIds] = await claimDueIds(t.db, { ...p, ids: [b.id], worker: "w1" });
      expect(byIds.id).toBe(b.id);
      expect(Object.keys(byIds)).toEqual([...CLAIMED_COLUMNS, "attempt_id"]);
      const [queued] = await claimDue(t.db, p);
      expect(queued.id).toBe(a.id);
      expect(Object.keys(queued)).toEqual([...CLAIMED_COLUMNS, "attempt_id"]);
      const [running] = await claimQueued(t.db, { owner: "w2", region: "local", limit: 1, leaseTtlMs: 60_000 });
      expect(running.id).toBe(a.id);
      expect(Object.keys(running)).toEqual([...CLAIMED_COLUMNS, "attempt_id"]);
      // Decoded, not raw text: the call reads these as objects and dates.
      expect(running.target.url).toBe(a.target.url);
      expect(running.due_at).toBeInstanceOf(Date);
    });
  });
}
