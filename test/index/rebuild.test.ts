/** Rebuilding the Redis due index from SQL, and the window loader that keeps it filled. */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { BunRedisDueIndex } from "../../src/index/bun-redis-index.ts";
import { loadWindow, markerLoadedUntil, rebuildIndex } from "../../src/index/index-rebuild.ts";
import { WindowLoader } from "../../src/index/window-loader.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { redisScratch, type RedisScratch, testRedisUrl } from "../helpers/redis.ts";

const FAR = 8.64e15;
let t: TestDb;
let s: RedisScratch;
let index: BunRedisDueIndex;

beforeEach(async () => {
  t = await freshDb("postgres");
  s = await redisScratch("rebuild");
  index = new BunRedisDueIndex({ url: testRedisUrl(), prefix: s.prefix, shards: 4 });
});
afterEach(async () => {
  await index.close();
  await s.cleanup();
  await t.close();
});

const ids = async () => (await index.dueList({ dueBy: FAR, limit: 1000 })).map((e) => e.jobId).sort();

test("rebuild loads exactly the scheduled jobs due inside the window, then sets the marker", async () => {
  const now = Date.now();
  const overdue = await insertJob(t.db, { due_at: new Date(now - 60_000) });
  const soon = await insertJob(t.db, { due_at: new Date(now + 1000) });
  await insertJob(t.db, { due_at: new Date(now + 3000) });
  const queued = await insertJob(t.db, { due_at: new Date(now) });
  const cancelled = await insertJob(t.db, { due_at: new Date(now) });
  const held = await insertJob(t.db, { due_at: new Date(now) });
  await t.db.query("UPDATE jobs SET status = 'queued' WHERE id = $1", [queued.id]);
  await t.db.query("UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", [cancelled.id]);
  await t.db.query("UPDATE jobs SET due_at = 'infinity' WHERE id = $1", [held.id]);
  // A stale entry and marker from before: the rebuild clears them.
  const stale = crypto.randomUUID();
  await index.entriesUpsert({ entries: [{ jobId: stale, dueMs: now }] });
  await index.builtMarkerSet({ value: "old" });

  const r = await rebuildIndex({ db: t.db, index, windowMs: 2000, batch: 2, now: () => now });
  expect(r).toEqual({ loaded: 2, loadedUntil: now + 2000 });
  expect(await ids()).toEqual([overdue.id, soon.id].sort());
  expect((await index.dueList({ dueBy: FAR, limit: 10 })).find((e) => e.jobId === soon.id)?.dueMs).toBe(now + 1000);
  const marker = await index.builtMarkerGet();
  expect(marker).not.toBeNull();
  expect(marker).not.toBe("old");
  expect(markerLoadedUntil(marker!)).toBe(now + 2000);
  // Each rebuild sets a fresh marker.
  await rebuildIndex({ db: t.db, index, windowMs: 2000, batch: 2, now: () => now });
  expect(await index.builtMarkerGet()).not.toBe(marker);
});

test("loadWindow pages through many jobs with equal due times without losing or repeating one", async () => {
  const now = Date.now();
  const jobs = [];
  for (let i = 0; i < 7; i++) jobs.push(await insertJob(t.db, { due_at: new Date(now + (i < 5 ? 0 : 10)) }));
  const upserted: string[] = [];
  const spy = Object.create(index) as BunRedisDueIndex;
  spy.entriesUpsert = async (p) => {
    upserted.push(...p.entries.map((e) => e.jobId));
    return index.entriesUpsert(p);
  };
  expect(await loadWindow({ db: t.db, index: spy, from: now, to: now + 11, batch: 2 })).toBe(7);
  expect(upserted.sort()).toEqual(jobs.map((j) => j.id).sort());
  expect(await ids()).toEqual(jobs.map((j) => j.id).sort());
  // [from, to): the end is exclusive.
  expect(await loadWindow({ db: t.db, index: spy, from: now + 1, to: now + 10, batch: 2 })).toBe(0);
});

test("the window loader rebuilds when the marker is gone (Redis flushed), and only then", async () => {
  const now = Date.now();
  const job = await insertJob(t.db, { due_at: new Date(now + 500) });
  const loader = new WindowLoader({ db: t.db, index, windowMs: 2000, batch: 10, intervalMs: 100, log: silentLogger, now: () => now });
  expect((await loader.runOnce()).rebuilt).toBe(true);
  expect(await ids()).toEqual([job.id]);
  expect((await loader.runOnce()).rebuilt).toBe(false);
  // A flush: entries and marker gone.
  await s.wipe();
  expect(await index.builtMarkerGet()).toBeNull();
  const r = await loader.runOnce();
  expect(r.rebuilt).toBe(true);
  expect(await ids()).toEqual([job.id]);
  // Only the marker deleted: still a rebuild.
  await s.client.send("DEL", [`${s.prefix}:built`]);
  let rebuilds = 0;
  const counting = new WindowLoader({
    db: t.db,
    index,
    windowMs: 2000,
    batch: 10,
    intervalMs: 100,
    log: silentLogger,
    now: () => now,
    onRebuild: () => rebuilds++,
  });
  expect((await counting.runOnce()).rebuilt).toBe(true);
  expect(rebuilds).toBe(1);
  expect(await index.builtMarkerGet()).not.toBeNull();
});

test("a loader that finds another process's marker goes on from its loaded-until instant without clearing", async () => {
  const now = Date.now();
  await rebuildIndex({ db: t.db, index, windowMs: 2000, batch: 10, now: () => now });
  const marker = await index.builtMarkerGet();
  // Not in SQL: a rebuild would clear it; a plain load keeps it.
  const onlyInIndex = crypto.randomUUID();
  await index.entriesUpsert({ entries: [{ jobId: onlyInIndex, dueMs: now }] });
  const later = await insertJob(t.db, { due_at: new Date(now + 2500) });
  const loader = new WindowLoader({ db: t.db, index, windowMs: 2000, batch: 10, intervalMs: 100, log: silentLogger, now: () => now + 1000 });
  expect(await loader.runOnce()).toEqual({ rebuilt: false, loaded: 1, loadedUntil: now + 3000 });
  expect(await ids()).toEqual([onlyInIndex, later.id].sort());
  expect(await index.builtMarkerGet()).toBe(marker);
});
