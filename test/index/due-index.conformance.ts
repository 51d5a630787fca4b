/**
 * The one test suite every DueIndex implementation passes. Each implementation's test file
 * calls runDueIndexSuite with its capabilities and a make() that gives every test a fresh,
 * empty index of its own.
 *
 * writes: "entries"  the index holds entries written through entriesUpsert/entriesRemove
 *                    (Redis); the suite writes through the index.
 *         "table"    the index reads the jobs table (SQL); entriesUpsert/Remove are no-ops,
 *                    so the harness writes jobs instead (tablePut / tableDrop).
 * A test that does not apply to an implementation shows up as skipped, with the reason in
 * its name; nothing is skipped silently.
 */
import { describe, expect, test } from "bun:test";
import { DUE_LIST_MAX, type DueEntry, type DueIndex } from "../../src/index/due-index.ts";
import { redisLayout } from "../../src/index/redis-layout.ts";

export interface DueIndexHarness {
  index: DueIndex;
  /** writes "table": makes these jobs scheduled at these due times (inserts or moves them). */
  tablePut?(entries: DueEntry[]): Promise<void>;
  /** writes "table": takes these jobs out of 'scheduled'. */
  tableDrop?(jobIds: string[]): Promise<void>;
  /** Another index over the same store, as after a process restart. */
  reopen(): Promise<DueIndex>;
  /** Loses this test's data in the store, as FLUSHDB or a restart without persistence would. */
  flush?(): Promise<void>;
  /** Entries in each shard's set, shard 0 first. */
  shardSizes?(): Promise<number[]>;
  /** An index of this kind whose server refuses connections, or accepts and never answers. */
  unreachable?(how: "refused" | "silent"): Promise<{ index: DueIndex; stop(): Promise<void> }>;
  cleanup(): Promise<void>;
}

export interface DueIndexSuiteCaps {
  writes: "entries" | "table";
  /** Shards the harness's index was made with (the suite needs 8), or null: not sharded. */
  shards: number | null;
  /** False when the store runs in process and cannot be unreachable. */
  remote: boolean;
}

/** Ids the jobs table accepts (uuid), deterministic so the shard spread is too. */
export function jid(i: number): string {
  return `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;
}

/** A fixed base instant: the suite never depends on the clock. */
export const T0 = 1_900_000_000_000;

const FAR = T0 + 1_000_000_000;

function sorted(entries: DueEntry[]): DueEntry[] {
  return [...entries].sort((a, b) => a.dueMs - b.dueMs || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0));
}

export function runDueIndexSuite(name: string, caps: DueIndexSuiteCaps, make: () => Promise<DueIndexHarness>) {
  const table = caps.writes === "table";
  const skip = {
    clear: table ? "the jobs table is the truth: clear cannot empty it (sql-index.test.ts checks it only forgets the marker)" : undefined,
    flush: table ? "the SQL index is always built: its marker lives in memory and no flush can lose the table" : undefined,
    entryWrites: table ? "the SQL index ignores entriesUpsert (sql-index.test.ts checks it is a no-op)" : undefined,
    shards: caps.shards === null ? "this index is not sharded" : undefined,
    remote: caps.remote ? undefined : "the store runs in this process and cannot be unreachable",
  };
  if (caps.shards !== null && caps.shards !== 8) throw new Error(`runDueIndexSuite(${name}): make the index with shards: 8, not ${caps.shards}`);

  // Cases that do not apply to an implementation are not registered at all (no skipped
  // tests in the run); why each does not apply is listed in `skip` above.
  function it(title: string, skipReason: string | undefined, fn: (h: DueIndexHarness) => Promise<void>) {
    if (skipReason) return;
    test(title, async () => {
      const h = await make();
      try {
        await fn(h);
      } finally {
        await h.cleanup();
      }
    });
  }

  const put = (h: DueIndexHarness, entries: DueEntry[]) => (table ? need(h.tablePut, "tablePut")(entries) : h.index.entriesUpsert({ entries }));
  const drop = (h: DueIndexHarness, jobIds: string[]) => (table ? need(h.tableDrop, "tableDrop")(jobIds) : h.index.entriesRemove({ jobIds }));

  describe(`due index conformance: ${name}`, () => {
    it("an empty index lists nothing, has no earliest due time and size 0", undefined, async (h) => {
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([]);
      expect(await h.index.earliestDue()).toBeNull();
      expect(await h.index.size()).toBe(0);
    });

    it("dueList is bounded by limit and dueBy (inclusive), earliest first across shards", undefined, async (h) => {
      // 60 entries, due times 1 s apart, written in a shuffled order.
      const entries = Array.from({ length: 60 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + ((i * 37) % 60) * 1000 }));
      await put(h, entries);
      const all = sorted(entries);
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual(all.slice(0, 10));
      expect(await h.index.dueList({ dueBy: FAR, limit: 1 })).toEqual(all.slice(0, 1));
      expect(await h.index.dueList({ dueBy: FAR, limit: 1000 })).toEqual(all);
      expect(await h.index.dueList({ dueBy: T0 + 24_000, limit: 1000 })).toEqual(all.slice(0, 25));
      expect(await h.index.dueList({ dueBy: T0 + 23_999, limit: 1000 })).toEqual(all.slice(0, 24));
      expect(await h.index.dueList({ dueBy: T0 + 24_000, limit: 7 })).toEqual(all.slice(0, 7));
      expect(await h.index.dueList({ dueBy: T0 - 1, limit: 10 })).toEqual([]);
      expect(await h.index.size()).toBe(60);
    });

    it("entries are spread over all 8 shard sets", skip.shards, async (h) => {
      const entries = Array.from({ length: 60 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i }));
      await put(h, entries);
      const sizes = await need(h.shardSizes, "shardSizes")();
      expect(sizes).toHaveLength(8);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(60);
      const layout = redisLayout({ shards: 8 });
      const expected = Array.from({ length: 8 }, (_, s) => entries.filter((e) => layout.shardOf(e.jobId) === s).length);
      expect(sizes).toEqual(expected);
      expect(sizes.every((n) => n > 0)).toBe(true);
    });

    it("the earliest entries all in one shard: a batch still takes all of them", undefined, async (h) => {
      const layout = redisLayout({ shards: 8 });
      const ids = Array.from({ length: 400 }, (_, i) => jid(1000 + i));
      const inShard0 = ids.filter((id) => layout.shardOf(id) === 0).slice(0, 12);
      expect(inShard0).toHaveLength(12);
      const others = ids.filter((id) => layout.shardOf(id) !== 0).slice(0, 40);
      const early = inShard0.map((jobId, i) => ({ jobId, dueMs: T0 + i }));
      const late = others.map((jobId, i) => ({ jobId, dueMs: T0 + 100 + i }));
      await put(h, [...late, ...early]);
      expect(await h.index.dueList({ dueBy: FAR, limit: 12 })).toEqual(early);
      expect(await h.index.dueList({ dueBy: FAR, limit: 14 })).toEqual([...early, ...late.slice(0, 2)]);
    });

    it("equal due times come out in job id order", undefined, async (h) => {
      const entries = [7, 3, 11, 5, 2, 13].map((i) => ({ jobId: jid(i), dueMs: T0 }));
      await put(h, [...entries, { jobId: jid(1), dueMs: T0 + 1 }]);
      const byId = sorted(entries);
      expect(byId.map((e) => e.jobId)).toEqual([2, 3, 5, 7, 11, 13].map(jid));
      expect(await h.index.dueList({ dueBy: T0, limit: 3 })).toEqual(byId.slice(0, 3));
      expect(await h.index.dueList({ dueBy: T0, limit: 100 })).toEqual(byId);
    });

    it("upsert of an existing job moves it (reschedule), without a second entry", undefined, async (h) => {
      await put(h, [
        { jobId: jid(1), dueMs: T0 + 1000 },
        { jobId: jid(2), dueMs: T0 + 2000 },
      ]);
      await put(h, [{ jobId: jid(1), dueMs: T0 + 3000 }]);
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([
        { jobId: jid(2), dueMs: T0 + 2000 },
        { jobId: jid(1), dueMs: T0 + 3000 },
      ]);
      expect(await h.index.dueList({ dueBy: T0 + 1000, limit: 10 })).toEqual([]);
      expect(await h.index.size()).toBe(2);
      // Earlier again, and the same write twice changes nothing more.
      await put(h, [{ jobId: jid(2), dueMs: T0 + 500 }]);
      await put(h, [{ jobId: jid(2), dueMs: T0 + 500 }]);
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([
        { jobId: jid(2), dueMs: T0 + 500 },
        { jobId: jid(1), dueMs: T0 + 3000 },
      ]);
      expect(await h.index.size()).toBe(2);
      expect(await h.index.earliestDue()).toBe(T0 + 500);
    });

    it("a job named twice in one upsert keeps its last due time", skip.entryWrites, async (h) => {
      await h.index.entriesUpsert({
        entries: [
          { jobId: jid(1), dueMs: T0 + 5000 },
          { jobId: jid(2), dueMs: T0 + 2000 },
          { jobId: jid(1), dueMs: T0 + 1000 },
        ],
      });
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([
        { jobId: jid(1), dueMs: T0 + 1000 },
        { jobId: jid(2), dueMs: T0 + 2000 },
      ]);
    });

    it("remove takes entries out (across shards); unknown ids are ignored", undefined, async (h) => {
      const entries = Array.from({ length: 20 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i * 10 }));
      await put(h, entries);
      const gone = [0, 3, 7, 8, 15, 19].map(jid);
      await drop(h, [...gone, jid(999)]);
      const left = entries.filter((e) => !gone.includes(e.jobId));
      expect(await h.index.dueList({ dueBy: FAR, limit: 100 })).toEqual(left);
      expect(await h.index.size()).toBe(14);
      expect(await h.index.earliestDue()).toBe(T0 + 10);
      // Removing again is harmless.
      await drop(h, gone);
      expect(await h.index.size()).toBe(14);
    });

    it("compare and set: removes or moves an entry only while it still has the score it was read with", skip.entryWrites, async (h) => {
      const entries = Array.from({ length: 12 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i * 100 }));
      await h.index.entriesUpsert({ entries });
      // Read at these scores; then a newer state is written for jobs 1 and 4 (the relay's ZADD).
      await h.index.entriesUpsert({
        entries: [
          { jobId: jid(1), dueMs: T0 + 5000 },
          { jobId: jid(4), dueMs: T0 + 6000 },
        ],
      });
      const changed = await h.index.entriesCompareAndSet({
        changes: [
          { jobId: jid(0), ifDueMs: T0, dueMs: null }, // removed
          { jobId: jid(1), ifDueMs: T0 + 100, dueMs: null }, // moved meanwhile: stays at its new score
          { jobId: jid(3), ifDueMs: T0 + 300, dueMs: T0 + 9000 }, // moved
          { jobId: jid(4), ifDueMs: T0 + 400, dueMs: T0 + 50 }, // moved meanwhile: not moved back
          { jobId: jid(999), ifDueMs: T0, dueMs: null }, // unknown: nothing
          { jobId: jid(998), ifDueMs: T0, dueMs: T0 }, // unknown: not added
        ],
      });
      expect(changed).toBe(2);
      const expected = entries
        .filter((e) => e.jobId !== jid(0))
        .map((e) =>
          e.jobId === jid(1)
            ? { ...e, dueMs: T0 + 5000 }
            : e.jobId === jid(3)
              ? { ...e, dueMs: T0 + 9000 }
              : e.jobId === jid(4)
                ? { ...e, dueMs: T0 + 6000 }
                : e,
        );
      expect(await h.index.dueList({ dueBy: FAR, limit: 100 })).toEqual(sorted(expected));
      // Again with the same expectations: nothing matches any more.
      expect(
        await h.index.entriesCompareAndSet({
          changes: [
            { jobId: jid(0), ifDueMs: T0, dueMs: null },
            { jobId: jid(3), ifDueMs: T0 + 300, dueMs: T0 },
          ],
        }),
      ).toBe(0);
      expect(await h.index.size()).toBe(11);
    });

    it("compare and set: many changes across shards, a job named twice keeps its last change; bad changes throw", skip.entryWrites, async (h) => {
      const n = 2500;
      const entries = Array.from({ length: n }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i }));
      await h.index.entriesUpsert({ entries });
      // Even ones removed, odd ones moved 1 s later; job 1 first removed, then moved (last wins).
      const changes = entries.map((e, i) => ({ jobId: e.jobId, ifDueMs: e.dueMs, dueMs: i % 2 === 0 ? null : e.dueMs + 1000 }));
      changes.unshift({ jobId: jid(1), ifDueMs: T0 + 1, dueMs: null });
      expect(await h.index.entriesCompareAndSet({ changes })).toBe(n);
      expect(await h.index.size()).toBe(n / 2);
      expect((await h.index.dueList({ dueBy: FAR, limit: 1 }))[0]).toEqual({ jobId: jid(1), dueMs: T0 + 1001 });
      expect(await h.index.entriesCompareAndSet({ changes: [] })).toBe(0);
      await expect(h.index.entriesCompareAndSet({ changes: [{ jobId: "", ifDueMs: T0, dueMs: null }] })).rejects.toThrow(/job id/);
      await expect(h.index.entriesCompareAndSet({ changes: [{ jobId: jid(1), ifDueMs: T0 + 0.5, dueMs: null }] })).rejects.toThrow(/ifDueMs/);
      await expect(h.index.entriesCompareAndSet({ changes: [{ jobId: jid(1), ifDueMs: T0, dueMs: Number.NaN }] })).rejects.toThrow(/dueMs/);
      expect(await h.index.size()).toBe(n / 2);
    });

    it(
      "compare and set on the SQL index changes nothing (the table is the truth)",
      table ? undefined : "only the SQL index ignores entry writes",
      async (h) => {
        await put(h, [{ jobId: jid(1), dueMs: T0 }]);
        expect(await h.index.entriesCompareAndSet({ changes: [{ jobId: jid(1), ifDueMs: T0, dueMs: null }] })).toBe(0);
        expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([{ jobId: jid(1), dueMs: T0 }]);
      },
    );

    it("earliestDue follows the earliest entry", undefined, async (h) => {
      expect(await h.index.earliestDue()).toBeNull();
      await put(h, [
        { jobId: jid(1), dueMs: T0 + 300 },
        { jobId: jid(2), dueMs: T0 + 100 },
        { jobId: jid(3), dueMs: T0 + 200 },
      ]);
      expect(await h.index.earliestDue()).toBe(T0 + 100);
      await drop(h, [jid(2)]);
      expect(await h.index.earliestDue()).toBe(T0 + 200);
      await put(h, [{ jobId: jid(1), dueMs: T0 + 50 }]);
      expect(await h.index.earliestDue()).toBe(T0 + 50);
      await drop(h, [jid(1), jid(3)]);
      expect(await h.index.earliestDue()).toBeNull();
    });

    it("size counts entries", undefined, async (h) => {
      expect(await h.index.size()).toBe(0);
      await put(
        h,
        Array.from({ length: 37 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i })),
      );
      expect(await h.index.size()).toBe(37);
      await drop(h, [jid(0), jid(1)]);
      expect(await h.index.size()).toBe(35);
    });

    it("clear removes every entry and the built marker", skip.clear, async (h) => {
      await put(
        h,
        Array.from({ length: 30 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i })),
      );
      await h.index.builtMarkerSet({ value: "built-1" });
      await h.index.clear();
      expect(await h.index.size()).toBe(0);
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([]);
      expect(await h.index.earliestDue()).toBeNull();
      expect(await h.index.builtMarkerGet()).toBeNull();
      // Usable afterwards.
      await put(h, [{ jobId: jid(5), dueMs: T0 }]);
      expect(await h.index.dueList({ dueBy: FAR, limit: 10 })).toEqual([{ jobId: jid(5), dueMs: T0 }]);
    });

    it("built marker: missing until set, then the last value set", undefined, async (h) => {
      expect(await h.index.builtMarkerGet()).toBeNull();
      await h.index.builtMarkerSet({ value: "epoch-7:2030-01-01" });
      expect(await h.index.builtMarkerGet()).toBe("epoch-7:2030-01-01");
      await h.index.builtMarkerSet({ value: "epoch-8" });
      expect(await h.index.builtMarkerGet()).toBe("epoch-8");
    });

    it("built marker and entries survive a reopen and are gone after a flush", skip.flush, async (h) => {
      await put(h, [{ jobId: jid(1), dueMs: T0 }]);
      await h.index.builtMarkerSet({ value: "built-A" });
      const again = await h.reopen();
      try {
        expect(await again.builtMarkerGet()).toBe("built-A");
        expect(await again.dueList({ dueBy: FAR, limit: 10 })).toEqual([{ jobId: jid(1), dueMs: T0 }]);
        await need(h.flush, "flush")();
        expect(await again.builtMarkerGet()).toBeNull();
        expect(await again.size()).toBe(0);
        expect(await h.index.builtMarkerGet()).toBeNull();
      } finally {
        await again.close();
      }
    });

    it("ping is true while the store answers", undefined, async (h) => {
      expect(await h.index.ping()).toBe(true);
    });

    it("ping is false, fast, when the server refuses connections; calls fail fast", skip.remote, async (h) => {
      const u = await need(h.unreachable, "unreachable")("refused");
      try {
        let t = performance.now();
        expect(await u.index.ping()).toBe(false);
        expect(performance.now() - t).toBeLessThan(1500);
        t = performance.now();
        await expect(u.index.dueList({ dueBy: FAR, limit: 10 })).rejects.toThrow();
        expect(performance.now() - t).toBeLessThan(3000);
        // Still false (and fast) on a second try: a failed client must not hang.
        t = performance.now();
        expect(await u.index.ping()).toBe(false);
        expect(performance.now() - t).toBeLessThan(1500);
      } finally {
        await u.stop();
      }
    });

    it("ping is false within its timeout when the server accepts and never answers", skip.remote, async (h) => {
      const u = await need(h.unreachable, "unreachable")("silent");
      try {
        const t = performance.now();
        expect(await u.index.ping()).toBe(false);
        expect(performance.now() - t).toBeLessThan(2500);
      } finally {
        await u.stop();
      }
    });

    it("a large batch (10k entries) goes in, lists and comes out", undefined, async (h) => {
      const n = 10_000;
      const entries = Array.from({ length: n }, (_, i) => ({ jobId: jid(i), dueMs: T0 + ((i * 7919) % n) }));
      await put(h, entries);
      expect(await h.index.size()).toBe(n);
      const all = sorted(entries);
      const listed = await h.index.dueList({ dueBy: FAR, limit: DUE_LIST_MAX });
      expect(listed.length).toBe(n);
      expect(listed).toEqual(all);
      expect(await h.index.dueList({ dueBy: T0 + 4999, limit: 500 })).toEqual(all.slice(0, 500));
      expect(await h.index.dueList({ dueBy: T0 + 99, limit: 500 })).toEqual(all.slice(0, 100));
      await drop(
        h,
        entries.map((e) => e.jobId),
      );
      expect(await h.index.size()).toBe(0);
    });

    it("bad requests throw a clear error", undefined, async (h) => {
      await expect(h.index.dueList({ dueBy: T0, limit: 0 })).rejects.toThrow(/limit/);
      await expect(h.index.dueList({ dueBy: T0, limit: DUE_LIST_MAX + 1 })).rejects.toThrow(/limit/);
      await expect(h.index.dueList({ dueBy: T0, limit: 1.5 })).rejects.toThrow(/limit/);
      await expect(h.index.dueList({ dueBy: Number.NaN, limit: 1 })).rejects.toThrow(/dueBy/);
      await expect(h.index.entriesUpsert({ entries: [{ jobId: jid(1), dueMs: T0 + 0.5 }] })).rejects.toThrow(/dueMs/);
      await expect(h.index.entriesUpsert({ entries: [{ jobId: "", dueMs: T0 }] })).rejects.toThrow(/job id/);
      await expect(h.index.entriesRemove({ jobIds: [""] })).rejects.toThrow(/job id/);
      // Nothing was written by the rejected calls.
      expect(await h.index.size()).toBe(0);
    });
  });
}

function need<T>(fn: T | undefined, what: string): T {
  if (!fn) throw new Error(`the harness must provide ${what} for this test`);
  return fn;
}
