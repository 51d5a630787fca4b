/**
 * The due-index outbox and its relay: rows written with appendOutbox reach a real Redis
 * index, at least once, on both database drivers.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { BunRedisDueIndex } from "../../src/index/bun-redis-index.ts";
import type { DueEntry } from "../../src/index/due-index.ts";
import { appendOutbox } from "../../src/index/outbox.ts";
import { OutboxRelay } from "../../src/index/outbox-relay.ts";
import { WindowLoader } from "../../src/index/window-loader.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { acquireLease, type LeaseHold } from "../../src/store/leases.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { closedPort, redisScratch, type RedisScratch, testRedisUrl } from "../helpers/redis.ts";

const FAR = 8.64e15;

for (const driver of DRIVERS) {
  describe(`index outbox relay (${driver})`, () => {
    let t: TestDb;
    let s: RedisScratch;
    let index: BunRedisDueIndex;
    /** The coordinator lease the relays of these tests work under. */
    let hold: LeaseHold;

    beforeEach(async () => {
      t = await freshDb(driver);
      hold = (await acquireLease(t.db, { name: "dispatch", owner: "relay-test", ttlMs: 600_000, skewMs: 0 }))!;
      s = await redisScratch("outbox");
      index = new BunRedisDueIndex({ url: testRedisUrl(), prefix: s.prefix, shards: 4 });
    });
    afterEach(async () => {
      await index.close();
      await s.cleanup();
      await t.close();
    });

    const relay = (over: Partial<ConstructorParameters<typeof OutboxRelay>[0]> = {}) =>
      new OutboxRelay({ db: t.db, index, batch: 100, windowMs: 60_000, log: silentLogger, fence: () => hold, ...over });
    const all = () => index.dueList({ dueBy: FAR, limit: 1000 });
    const outboxCount = async () => Number((await t.db.query<{ n: string }>("SELECT count(*) AS n FROM index_outbox"))[0]!.n);
    /** The test's database, counting the statements sent outside a transaction and the transactions. */
    const counted = () => {
      const n = { statements: 0, txs: 0 };
      const db = {
        ...t.db,
        query: ((...a: Parameters<typeof t.db.query>) => {
          n.statements++;
          return t.db.query(...a);
        }) as typeof t.db.query,
        tx: ((fn: Parameters<typeof t.db.tx>[0]) => {
          n.txs++;
          return t.db.tx(fn);
        }) as typeof t.db.tx,
      };
      return { db, n };
    };
    const byId = (es: DueEntry[]) => Object.fromEntries(es.map((e) => [e.jobId, e.dueMs]));

    test("append in a transaction, relay: the entries are in Redis and the rows are gone", async () => {
      const a = crypto.randomUUID();
      const b = crypto.randomUUID();
      const now = Date.now();
      await t.db.tx((q) =>
        appendOutbox(q, [
          { jobId: a, dueAt: new Date(now + 1000) },
          { jobId: b, dueAt: new Date(now - 5000) },
        ]),
      );
      // A rolled-back transaction leaves no row.
      await expect(
        t.db.tx(async (q) => {
          await appendOutbox(q, [{ jobId: crypto.randomUUID(), dueAt: new Date(now) }]);
          throw new Error("rollback");
        }),
      ).rejects.toThrow("rollback");
      expect(await outboxCount()).toBe(2);
      const r = await relay().runOnce();
      expect(r.applied).toBe(2);
      expect(byId(await all())).toEqual({ [a]: now + 1000, [b]: now - 5000 });
      expect(await outboxCount()).toBe(0);
      expect((await relay().runOnce()).applied).toBe(0);
    });

    test("a reschedule (two rows for one job in a batch): the last row wins", async () => {
      const a = crypto.randomUUID();
      const b = crypto.randomUUID();
      const now = Date.now();
      // a moves later, b moves earlier: "first wins" or "earliest wins" would fail one of them.
      await appendOutbox(t.db, [
        { jobId: a, dueAt: new Date(now + 1000) },
        { jobId: b, dueAt: new Date(now + 9000) },
      ]);
      await appendOutbox(t.db, [
        { jobId: a, dueAt: new Date(now + 5000) },
        { jobId: b, dueAt: new Date(now + 2000) },
      ]);
      expect((await relay().runOnce()).applied).toBe(4);
      expect(byId(await all())).toEqual({ [a]: now + 5000, [b]: now + 2000 });
    });

    test("a remove row takes the job out of the index; add then remove in one batch leaves nothing", async () => {
      const a = crypto.randomUUID();
      const b = crypto.randomUUID();
      const now = Date.now();
      await appendOutbox(t.db, [{ jobId: a, dueAt: new Date(now) }]);
      await relay().runOnce();
      expect(await index.size()).toBe(1);
      await appendOutbox(t.db, [
        { jobId: a, dueAt: null },
        { jobId: b, dueAt: new Date(now) },
        { jobId: b, dueAt: null },
      ]);
      expect((await relay().runOnce()).applied).toBe(3);
      expect(await all()).toEqual([]);
      expect(await outboxCount()).toBe(0);
    });

    test("a job due beyond the window: not added by the relay, added by the window loader once the window reaches it", async () => {
      const windowMs = 2000;
      const now = Date.now();
      const job = await insertJob(t.db, { due_at: new Date(now + 3000) });
      await appendOutbox(t.db, [{ jobId: job.id, dueAt: job.due_at }]);
      const loader = new WindowLoader({ db: t.db, index, windowMs, batch: 10, intervalMs: 100, log: silentLogger, now: () => now });
      expect((await loader.runOnce()).rebuilt).toBe(true); // no marker yet
      expect((await relay({ windowMs, now: () => now }).runOnce()).applied).toBe(1);
      expect(await index.size()).toBe(0);
      expect(await outboxCount()).toBe(0);
      // The window moves on: 0.5 s later it still ends before the job, 1.5 s later it covers it.
      let at = now + 500;
      const moving = new WindowLoader({ db: t.db, index, windowMs, batch: 10, intervalMs: 100, log: silentLogger, now: () => at });
      expect((await moving.runOnce()).loaded).toBe(0);
      expect(await index.size()).toBe(0);
      at = now + 1500;
      const r = await moving.runOnce();
      expect(r).toEqual({ rebuilt: false, loaded: 1, loadedUntil: now + 1500 + windowMs });
      expect(await all()).toEqual([{ jobId: job.id, dueMs: job.due_at.getTime() }]);
    });

    test("Redis unreachable: runOnce throws and the rows stay; with Redis back they are applied and deleted", async () => {
      const a = crypto.randomUUID();
      const now = Date.now();
      await appendOutbox(t.db, [
        { jobId: a, dueAt: new Date(now) },
        { jobId: crypto.randomUUID(), dueAt: null },
      ]);
      const down = new BunRedisDueIndex({ url: `redis://127.0.0.1:${await closedPort()}`, prefix: s.prefix, maxRetries: 0, connectionTimeoutMs: 500 });
      try {
        await expect(relay({ index: down }).runOnce()).rejects.toThrow();
      } finally {
        await down.close();
      }
      expect(await outboxCount()).toBe(2);
      expect(await index.size()).toBe(0);
      expect((await relay().runOnce()).applied).toBe(2);
      expect(await all()).toEqual([{ jobId: a, dueMs: now }]);
      expect(await outboxCount()).toBe(0);
    });

    test("fenced: a relay whose process does not hold the coordinator lease at its epoch applies nothing; the rows wait for the holder", async () => {
      const a = crypto.randomUUID();
      const now = Date.now();
      await appendOutbox(t.db, [{ jobId: a, dueAt: new Date(now) }]);
      // Not leading at all: no transaction, nothing applied.
      expect(await relay({ fence: () => undefined }).runOnce()).toEqual({ applied: 0, fenced: true, lagSeconds: 0 });
      // A hold from before a takeover: the lease row names another owner at a higher epoch.
      await t.db.query("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name = 'dispatch'");
      const next = (await acquireLease(t.db, { name: "dispatch", owner: "relay-test-2", ttlMs: 600_000, skewMs: 0 }))!;
      expect(next.epoch).toBe(hold.epoch + 1);
      expect(await relay().runOnce()).toEqual({ applied: 0, fenced: true, lagSeconds: 0 });
      // The same owner with the old epoch is fenced too.
      expect((await relay({ fence: () => ({ ...next, epoch: hold.epoch }) }).runOnce()).fenced).toBe(true);
      expect(await index.size()).toBe(0);
      expect(await outboxCount()).toBe(1);
      const r = await relay({ fence: () => next }).runOnce();
      expect([r.applied, r.fenced]).toEqual([1, false]);
      expect(await all()).toEqual([{ jobId: a, dueMs: now }]);
    });

    test("lag: an old pending row is reported (> 0 s), an empty outbox reports 0", async () => {
      await appendOutbox(t.db, [{ jobId: crypto.randomUUID(), dueAt: new Date() }]);
      await t.db.query("UPDATE index_outbox SET created_at = now() - interval '5 seconds'");
      const lags: number[] = [];
      const r = await relay({ onLag: (s) => lags.push(s) }).runOnce();
      expect(r.applied).toBe(1);
      expect(r.lagSeconds).toBeGreaterThan(4);
      expect(lags).toEqual([r.lagSeconds]);
      expect((await relay().runOnce()).lagSeconds).toBe(0);
    });

    test("idle: with nothing waiting a pass is one statement and no transaction; a row written after it goes with the next pass", async () => {
      const { db, n } = counted();
      const lags: number[] = [];
      const r = relay({ db, onLag: (x) => lags.push(x) });
      for (let i = 0; i < 3; i++) expect(await r.runOnce()).toEqual({ applied: 0, fenced: false, lagSeconds: 0 });
      expect([n.txs, n.statements]).toEqual([0, 3]);
      expect(lags).toEqual([0, 0, 0]);
      // Written after an empty pass: the next one finds it, takes it in its transaction and applies it.
      const a = crypto.randomUUID();
      const now = Date.now();
      await appendOutbox(t.db, [{ jobId: a, dueAt: new Date(now) }]);
      expect((await r.runOnce()).applied).toBe(1);
      expect(n.txs).toBe(1);
      expect(await all()).toEqual([{ jobId: a, dueMs: now }]);
      expect(await outboxCount()).toBe(0);
    });

    test("after a full batch the next pass does not ask whether rows wait: it takes them", async () => {
      const { db, n } = counted();
      const now = Date.now();
      await appendOutbox(
        t.db,
        [0, 1, 2].map((i) => ({ jobId: crypto.randomUUID(), dueAt: new Date(now + i) })),
      );
      const r = relay({ db, batch: 2 });
      expect((await r.runOnce()).applied).toBe(2);
      expect(n.statements).toBe(1);
      expect((await r.runOnce()).applied).toBe(1);
      expect(n.statements).toBe(1);
      // Not full: the next pass asks again, and finds nothing.
      expect((await r.runOnce()).applied).toBe(0);
      expect(n.statements).toBe(2);
      expect(await index.size()).toBe(3);
    });

    test("batches: a full batch goes again at once, a partial one pauses; the oldest rows go first", async () => {
      const ids = Array.from({ length: 5 }, () => crypto.randomUUID());
      const now = Date.now();
      await appendOutbox(
        t.db,
        ids.map((jobId, i) => ({ jobId, dueAt: new Date(now + i) })),
      );
      const r3 = relay({ batch: 3, intervalMs: 100 });
      const delay = (x: unknown) => (r3 as unknown as { nextDelayMs(l: unknown): number }).nextDelayMs(x);
      const first = await r3.runOnce();
      expect(first.applied).toBe(3);
      expect(delay(first)).toBe(0);
      expect((await all()).map((e) => e.jobId)).toEqual(ids.slice(0, 3));
      const second = await r3.runOnce();
      expect(second.applied).toBe(2);
      expect(delay(second)).toBe(100);
      expect(await index.size()).toBe(5);
    });
  });
}
