import { afterAll, describe, expect, test } from "bun:test";
import { BunRedisDueIndex } from "../../src/index/bun-redis-index.ts";
import { UpstashDueIndex } from "../../src/index/upstash-index.ts";
import { fnv1a32, MEMBERS_PER_COMMAND, mergeDue, parseWithScores, redisLayout, removeBatches, upsertBatches } from "../../src/index/redis-layout.ts";
import { redisScratch, testRedisUrl } from "../helpers/redis.ts";
import { startUpstashRest, type UpstashRestFixture } from "../helpers/upstash-rest.ts";
import { T0, jid } from "./due-index.conformance.ts";

describe("redis layout", () => {
  test("FNV-1a 32-bit matches the published vectors (keys depend on it never changing)", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
    expect(fnv1a32("foobar")).toBe(0xbf9cf968);
    // UTF-8 bytes, not UTF-16 code units: "é" is 0xc3 0xa9.
    expect(fnv1a32("é")).toBe(Math.imul((Math.imul(0x811c9dc5 ^ 0xc3, 0x01000193) >>> 0) ^ 0xa9, 0x01000193) >>> 0);
  });

  test("key names, defaults and the shard of an id", () => {
    const l = redisLayout();
    expect(l.prefix).toBe("scheduler");
    expect(l.shards).toBe(8);
    expect(l.markerKey).toBe("scheduler:built");
    expect(l.shardKeys).toEqual(Array.from({ length: 8 }, (_, i) => `scheduler:due:${i}`));
    expect(l.shardOf("foobar")).toBe(0xbf9cf968 % 8);
    const one = redisLayout({ prefix: "p", shards: 1 });
    expect(one.shardKeys).toEqual(["p:due:0"]);
    expect(one.shardOf(jid(5))).toBe(0);
    expect(redisLayout({ shards: 1024 }).shardKeys).toHaveLength(1024);
  });

  test("options are checked with a clear error", () => {
    for (const shards of [0, -1, 1025, 1.5, Number.NaN]) {
      expect(() => redisLayout({ shards })).toThrow(/shards must be an integer in 1\.\.1024/);
    }
    expect(() => redisLayout({ prefix: "" })).toThrow(/prefix/);
    expect(() => redisLayout({ prefix: "a b" })).toThrow(/prefix/);
  });

  test("writes are grouped by shard, split into commands of at most 1000 members, last due time wins", () => {
    const l = redisLayout({ prefix: "p", shards: 2 });
    const entries = Array.from({ length: 5000 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i }));
    const batches = upsertBatches(l, [...entries, { jobId: jid(3), dueMs: 1 }]);
    expect(batches.every((b) => b.items.length <= MEMBERS_PER_COMMAND)).toBe(true);
    expect(batches.reduce((n, b) => n + b.items.length, 0)).toBe(5000);
    for (const b of batches) expect(b.items.every((e) => b.key === l.shardKeys[l.shardOf(e.jobId)])).toBe(true);
    expect(batches.flatMap((b) => b.items).find((e) => e.jobId === jid(3))?.dueMs).toBe(1);
    const rm = removeBatches(l, [jid(1), jid(1), jid(2)]);
    expect(rm.flatMap((b) => b.items).sort()).toEqual([jid(1), jid(2)]);
    expect(upsertBatches(l, [])).toEqual([]);
  });

  test("WITHSCORES replies are read in both shapes; anything else is an error", () => {
    expect(
      parseWithScores([
        ["a", 5],
        ["b", 1700000000123],
      ]),
    ).toEqual([
      { jobId: "a", dueMs: 5 },
      { jobId: "b", dueMs: 1700000000123 },
    ]);
    expect(parseWithScores(["a", "5", "b", "1700000000123"])).toEqual([
      { jobId: "a", dueMs: 5 },
      { jobId: "b", dueMs: 1700000000123 },
    ]);
    expect(parseWithScores([])).toEqual([]);
    expect(() => parseWithScores(null)).toThrow(/expected an array/);
    expect(() => parseWithScores(["a", "5", "b"])).toThrow(/odd-length/);
    expect(() => parseWithScores(["a", "x"])).toThrow(/score of a/);
    expect(() => parseWithScores([[1, 2]])).toThrow(/member/);
  });

  test("merging shards keeps the earliest `limit`, ties by id", () => {
    const merged = mergeDue(
      [
        [
          { jobId: "c", dueMs: 1 },
          { jobId: "d", dueMs: 9 },
        ],
        [
          { jobId: "a", dueMs: 1 },
          { jobId: "b", dueMs: 2 },
        ],
        [],
      ],
      3,
    );
    expect(merged).toEqual([
      { jobId: "a", dueMs: 1 },
      { jobId: "c", dueMs: 1 },
      { jobId: "b", dueMs: 2 },
    ]);
  });
});

describe("both Redis clients share one layout", () => {
  let f: UpstashRestFixture | undefined;
  afterAll(async () => {
    await f?.stop();
  });

  test("what one client writes, the other reads; keys and scores are as specified", async () => {
    f = await startUpstashRest({ redisUrl: testRedisUrl() });
    const s = await redisScratch("cross");
    const bun = new BunRedisDueIndex({ url: testRedisUrl(), prefix: s.prefix, shards: 4 });
    const up = new UpstashDueIndex({ url: f.url, token: f.token, prefix: s.prefix, shards: 4, retries: 0 });
    try {
      // Ids a JSON-minded client would turn into numbers or mangle.
      const odd = ["007", "1e3", "12345", "jöb-✓", "null"];
      await bun.entriesUpsert({ entries: odd.map((jobId, i) => ({ jobId, dueMs: T0 + i })) });
      await up.entriesUpsert({ entries: [{ jobId: jid(1), dueMs: T0 + 100 }] });
      await up.builtMarkerSet({ value: "from-upstash" });
      const expected = [...odd.map((jobId, i) => ({ jobId, dueMs: T0 + i })), { jobId: jid(1), dueMs: T0 + 100 }];
      expect(await up.dueList({ dueBy: T0 + 100, limit: 10 })).toEqual(expected);
      expect(await bun.dueList({ dueBy: T0 + 100, limit: 10 })).toEqual(expected);
      expect(await bun.builtMarkerGet()).toBe("from-upstash");
      // The raw keys: `${prefix}:due:${fnv1a32(id) % shards}`, score = due ms.
      for (const e of expected) {
        const key = `${s.prefix}:due:${fnv1a32(e.jobId) % 4}`;
        expect(Number(await s.client.send("ZSCORE", [key, e.jobId]))).toBe(e.dueMs);
      }
      expect(await s.client.send("GET", [`${s.prefix}:built`])).toBe("from-upstash");
      expect((await s.keys()).sort()).toEqual([...new Set(expected.map((e) => `${s.prefix}:due:${fnv1a32(e.jobId) % 4}`)), `${s.prefix}:built`].sort());
      await up.entriesRemove({ jobIds: ["007", "jöb-✓"] });
      expect(await bun.size()).toBe(4);
      expect(await up.earliestDue()).toBe(T0 + 1);
      expect(await bun.earliestDue()).toBe(T0 + 1);
    } finally {
      await bun.close();
      await up.close();
      await s.cleanup();
    }
  });
});
