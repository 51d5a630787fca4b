// `scheduler index rebuild` as a real process against real Postgres and Redis.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { BunRedisDueIndex } from "../../src/index/bun-redis-index.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import type { Db } from "../../src/store/db.ts";
import { migrate } from "../../src/store/migrate.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { redisScratch, testRedisUrl, type RedisScratch } from "../helpers/redis.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");

function run(args: string[], env: Record<string, string>) {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { env: { PATH: process.env.PATH ?? "", ...env }, stdin: "ignore" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe("scheduler index rebuild (postgres, redis)", () => {
  let url: string;
  let db: Db;
  let scratch: RedisScratch;
  beforeAll(async () => {
    url = await createDatabase();
    db = openPostgres({ url, maxConnections: 2 });
    await migrate(db);
    scratch = await redisScratch("cli-rebuild");
  });
  afterAll(async () => {
    await scratch?.cleanup();
    await db?.close();
    await dropDatabase(url);
  });

  test("loads the scheduled jobs due within the window, and only those", async () => {
    const soon = await insertJob(db, { due_at: new Date(Date.now() + 60_000) });
    const overdue = await insertJob(db, { due_at: new Date(Date.now() - 60_000) });
    const far = await insertJob(db, { due_at: new Date(Date.now() + 3 * 3_600_000) });
    const cancelled = await insertJob(db, { due_at: new Date(Date.now() + 60_000) });
    await db.query("UPDATE jobs SET status = 'cancelled' WHERE id = $1", [cancelled.id]);
    // A stale member from before the rebuild must be gone after it.
    // The layout the scheduler uses: one set per dispatch shard (SCHEDULER_SHARDS, default 16).
    const index = new BunRedisDueIndex({ url: testRedisUrl(), prefix: scratch.prefix, shards: 16, placement: "slot" });
    try {
      await index.entriesUpsert({ entries: [{ jobId: "00000000-0000-7000-8000-000000000000", dueMs: Date.now() }] });
      const r = run(["index", "rebuild"], {
        DATABASE_URL: url,
        REDIS_URL: testRedisUrl(),
        SCHEDULER_INDEX_PREFIX: scratch.prefix,
        SCHEDULER_INDEX_WINDOW: "1h",
      });
      expect(r.err).toBe("");
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/^index rebuilt: 2 jobs due before /);
      const listed = await index.dueList({ dueBy: Date.now() + 3_600_000, limit: 100 });
      expect(listed.map((e) => e.jobId).sort()).toEqual([soon.id, overdue.id].sort());
      expect(listed.find((e) => e.jobId === soon.id)?.dueMs).toBe(soon.due_at.getTime());
      expect(await index.builtMarkerGet()).not.toBeNull();
      expect(listed.some((e) => e.jobId === far.id)).toBe(false);
    } finally {
      await index.close();
    }
  });

  test("without REDIS_URL or Upstash settings it says what is missing, in one line", () => {
    const r = run(["index", "rebuild"], { DATABASE_URL: url });
    expect(r.code).not.toBe(0);
    expect(r.err.trim().split("\n")).toHaveLength(1);
    expect(r.err).toContain("REDIS_URL");
  });
});
