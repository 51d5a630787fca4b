// A job's delivery writes two new versions of its row (the claim, the completion), neither HOT.
// Pages keep room for them (033, fillfactor 50): a version that does not fit goes to another
// page, and PostgreSQL first writes a lock record for the old one (bench:statements counts the
// WAL). With the room gone (fillfactor back at 85 or 100) most claimed rows move: this fails.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedAuthority } from "../../src/store/authority.ts";
import { claimDueIds } from "../../src/store/dispatch-queries.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { newJob } from "../helpers/jobs.ts";
import { takeShards, tokenOf } from "../helpers/shards.ts";

for (const driver of DRIVERS) {
  describe(`jobs pages (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(() => t?.close());

    const pages = async (ids: string[]) =>
      new Map(
        (
          await t.db.query<{ id: string; page: string }>("SELECT id::text AS id, (ctid::text::point)[0]::text AS page FROM jobs WHERE id = ANY($1::uuid[])", [
            ids,
          ])
        ).map((r) => [r.id, r.page]),
      );

    test("a claim writes the new version of nearly every job on the page its row was on", async () => {
      const n = 200;
      const made = await insertJobs(
        t.db,
        Array.from({ length: n }, () => newJob({ tenant: "pages", due_at: new Date(Date.now() - 1000) })),
      );
      const ids = made.map((m) => m.job.id);
      const before = await pages(ids);
      expect(new Set(before.values()).size).toBeGreaterThan(5); // several pages, densely filled
      const h = await takeShards(t.db, "disp");
      const claimed = await claimDueIds(t.db, { fence: h, limit: n, token: tokenOf(h), ttlMs: 60_000, worker: "w1", ids });
      expect(claimed).toHaveLength(n);
      const after = await pages(ids);
      const stayed = ids.filter((id) => after.get(id) === before.get(id)).length;
      expect(stayed).toBeGreaterThanOrEqual(0.9 * n);
    });
  });
}
