import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { DueEntry } from "../../src/index/due-index.ts";
import { SqlDueIndex } from "../../src/index/sql-index.ts";
import type { Db } from "../../src/store/db.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, newJob } from "../helpers/jobs.ts";
import { closedPort, silentTcpServer } from "../helpers/redis.ts";
import { runDueIndexSuite, T0, jid, type DueIndexHarness } from "./due-index.conformance.ts";

const FAR = T0 + 1_000_000_000;

/** Makes these jobs scheduled at these due times: moves the ones that exist, inserts the rest. */
async function tablePut(db: Db, entries: DueEntry[]): Promise<void> {
  const ids = entries.map((e) => e.jobId);
  const existing = new Set((await db.query<{ id: string }>("SELECT id FROM jobs WHERE id = ANY($1::uuid[])", [ids])).map((r) => r.id));
  for (const e of entries.filter((e) => existing.has(e.jobId))) {
    await db.query("UPDATE jobs SET status = 'scheduled', due_at = $2 WHERE id = $1", [e.jobId, new Date(e.dueMs)]);
  }
  const fresh = entries.filter((e) => !existing.has(e.jobId));
  if (fresh.length <= 100) {
    for (const e of fresh) await insertJob(db, { id: e.jobId, due_at: new Date(e.dueMs) });
    return;
  }
  // Bulk (the 10k test): one statement per chunk.
  for (let i = 0; i < fresh.length; i += 2500) {
    await insertJobs(
      db,
      fresh.slice(i, i + 2500).map((e) => newJob({ id: e.jobId, due_at: new Date(e.dueMs) })),
    );
  }
}

async function tableDrop(db: Db, ids: string[]): Promise<void> {
  await db.query("UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = ANY($1::uuid[]) AND status = 'scheduled'", [ids]);
}

for (const driver of DRIVERS) {
  let t: TestDb | undefined;
  afterAll(async () => {
    await t?.close();
  });
  const fresh = async (): Promise<Db> => {
    t ??= await freshDb(driver);
    await t.db.query("DELETE FROM attempts");
    await t.db.query("DELETE FROM jobs");
    return t.db;
  };

  runDueIndexSuite(`sql (${driver})`, { writes: "table", shards: null, remote: driver === "postgres" }, async (): Promise<DueIndexHarness> => {
    const db = await fresh();
    return {
      index: new SqlDueIndex(db),
      tablePut: (entries) => tablePut(db, entries),
      tableDrop: (ids) => tableDrop(db, ids),
      reopen: async () => new SqlDueIndex(db),
      unreachable: driver === "postgres" ? unreachablePostgres : undefined,
      cleanup: async () => {},
    };
  });

  describe(`sql index specifics (${driver})`, () => {
    let db: Db;
    beforeAll(async () => {
      db = await fresh();
    });

    test("entriesUpsert and entriesRemove do not change what is listed: the table is the truth", async () => {
      await db.query("DELETE FROM attempts");
      await db.query("DELETE FROM jobs");
      const index = new SqlDueIndex(db);
      await index.entriesUpsert({ entries: [{ jobId: jid(1), dueMs: T0 }] });
      expect(await index.dueList({ dueBy: FAR, limit: 10 })).toEqual([]);
      await tablePut(db, [{ jobId: jid(2), dueMs: T0 + 5 }]);
      await index.entriesRemove({ jobIds: [jid(2)] });
      expect(await index.dueList({ dueBy: FAR, limit: 10 })).toEqual([{ jobId: jid(2), dueMs: T0 + 5 }]);
    });

    test("only scheduled jobs are listed and counted; held occurrences (due 'infinity') never", async () => {
      await db.query("DELETE FROM attempts");
      await db.query("DELETE FROM jobs");
      const index = new SqlDueIndex(db);
      await tablePut(
        db,
        [1, 2, 3, 4, 5].map((i) => ({ jobId: jid(i), dueMs: T0 + i })),
      );
      await insertJob(db, { id: jid(6), due_at: "infinity" });
      await db.query("UPDATE jobs SET status = 'queued' WHERE id = $1", [jid(1)]);
      await db.query("UPDATE jobs SET status = 'running' WHERE id = $1", [jid(2)]);
      await db.query("UPDATE jobs SET status = 'succeeded' WHERE id = $1", [jid(3)]);
      expect(await index.dueList({ dueBy: 8.64e15, limit: 10 })).toEqual([
        { jobId: jid(4), dueMs: T0 + 4 },
        { jobId: jid(5), dueMs: T0 + 5 },
      ]);
      expect(await index.earliestDue()).toBe(T0 + 4);
      expect(await index.size()).toBe(2);
      // A dueBy beyond what timestamptz holds is clamped, not an error.
      expect(await index.dueList({ dueBy: Number.MAX_SAFE_INTEGER, limit: 10 })).toHaveLength(2);
    });

    test("the built marker lives in this index object only, and clear forgets it", async () => {
      const index = new SqlDueIndex(db);
      await index.builtMarkerSet({ value: "b1" });
      expect(await index.builtMarkerGet()).toBe("b1");
      expect(await new SqlDueIndex(db).builtMarkerGet()).toBeNull();
      await tablePut(db, [{ jobId: jid(40), dueMs: T0 }]);
      const before = await index.size();
      await index.clear();
      expect(await index.builtMarkerGet()).toBeNull();
      expect(await index.size()).toBe(before);
    });
  });
}

async function unreachablePostgres(how: "refused" | "silent") {
  const silent = how === "silent" ? silentTcpServer() : undefined;
  const port = silent?.port ?? (await closedPort());
  const db = openPostgres({ url: `postgres://postgres@127.0.0.1:${port}/postgres`, maxConnections: 1 });
  return {
    index: new SqlDueIndex(db),
    async stop() {
      silent?.stop();
      // Let the pending connect fail (refused now) before end(), which would otherwise wait
      // up to its 5 s timeout for the hung query.
      await db.query("SELECT 1").catch(() => {});
      await db.close();
    },
  };
}
