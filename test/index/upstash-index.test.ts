import { afterAll, expect, test } from "bun:test";
import { MEMBERS_PER_REQUEST, UpstashDueIndex } from "../../src/index/upstash-index.ts";
import { closedPort, redisScratch, silentTcpServer, testRedisUrl } from "../helpers/redis.ts";
import { startUpstashRest, type UpstashRestFixture } from "../helpers/upstash-rest.ts";
import { runDueIndexSuite, T0, jid } from "./due-index.conformance.ts";

let fixture: Promise<UpstashRestFixture> | undefined;
const rest = () => (fixture ??= startUpstashRest({ redisUrl: testRedisUrl() }));
afterAll(async () => {
  if (fixture) await (await fixture).stop();
});

runDueIndexSuite("@upstash/redis over REST", { writes: "entries", shards: 8, remote: true }, async () => {
  const f = await rest();
  const s = await redisScratch("upidx");
  const open = (url = f.url) => new UpstashDueIndex({ url, token: f.token, prefix: s.prefix, shards: 8, retries: 0 });
  return {
    index: open(),
    reopen: async () => open(),
    flush: () => s.wipe(),
    shardSizes: () => Promise.all(Array.from({ length: 8 }, async (_, i) => Number(await s.client.send("ZCARD", [`${s.prefix}:due:${i}`])))),
    async unreachable(how) {
      if (how === "refused") {
        const index = open(`http://127.0.0.1:${await closedPort()}`);
        return { index, stop: () => index.close() };
      }
      const srv = silentTcpServer();
      const index = open(`http://127.0.0.1:${srv.port}`);
      return {
        index,
        async stop() {
          await index.close();
          srv.stop();
        },
      };
    },
    cleanup: () => s.cleanup(),
  };
});

test("upstash: each call is one HTTP request (a pipeline over all shards)", async () => {
  const f = await rest();
  const s = await redisScratch("upreq");
  try {
    const index = new UpstashDueIndex({ url: f.url, token: f.token, prefix: s.prefix, shards: 8, retries: 0 });
    const before = f.requests.length;
    await index.entriesUpsert({ entries: Array.from({ length: 100 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i })) });
    await index.dueList({ dueBy: T0 + 1000, limit: 10 });
    await index.size();
    const mine = f.requests.slice(before);
    expect(mine.map((r) => r.path)).toEqual(["/pipeline", "/pipeline", "/pipeline"]);
    // One ZADD per shard, one ZRANGE per shard, one ZCARD per shard.
    expect(mine.map((r) => r.commands)).toEqual([8, 8, 8]);
    // A large write is split into a few requests of bounded size, not one huge body.
    const mark = f.requests.length;
    await index.entriesUpsert({ entries: Array.from({ length: 10_000 }, (_, i) => ({ jobId: jid(i), dueMs: T0 + i })) });
    const big = f.requests.slice(mark);
    expect(big.length).toBeGreaterThanOrEqual(2);
    expect(big.length).toBeLessThanOrEqual(4);
    expect(Math.max(...big.map((r) => r.bytes))).toBeLessThan(MEMBERS_PER_REQUEST * 80);
    expect(await index.size()).toBe(10_000);
  } finally {
    await s.cleanup();
  }
});

test("upstash: a wrong token is an error on every call, and ping is false", async () => {
  const f = await rest();
  const index = new UpstashDueIndex({ url: f.url, token: "not-the-token", prefix: "never-written", retries: 0 });
  await expect(index.size()).rejects.toThrow(/Unauthorized/);
  await expect(index.builtMarkerSet({ value: "x" })).rejects.toThrow(/Unauthorized/);
  expect(await index.ping()).toBe(false);
});

test("upstash: a hung server is an error after requestTimeoutMs, never a made-up null", async () => {
  // With a plain AbortSignal, @upstash/redis turns an abort into a result: GET would answer
  // null ("no marker": rebuild!) instead of failing. The index passes a signal factory.
  const srv = silentTcpServer();
  const index = new UpstashDueIndex({ url: `http://127.0.0.1:${srv.port}`, token: "t", retries: 0, requestTimeoutMs: 300 });
  try {
    const t = performance.now();
    await expect(index.builtMarkerGet()).rejects.toThrow();
    await expect(index.dueList({ dueBy: T0, limit: 5 })).rejects.toThrow();
    expect(performance.now() - t).toBeLessThan(2000);
  } finally {
    srv.stop();
  }
});

test("upstash: options are checked", () => {
  expect(() => new UpstashDueIndex({ url: "redis://127.0.0.1:6379", token: "t" })).toThrow(/REDIS_URL/);
  expect(() => new UpstashDueIndex({ url: "https://x.upstash.io", token: "" })).toThrow(/UPSTASH_REDIS_REST_TOKEN/);
  expect(() => new UpstashDueIndex({ url: "https://x.upstash.io", token: "t", shards: 2000 })).toThrow(/shards/);
  expect(() => new UpstashDueIndex({ url: "https://x.upstash.io", token: "t", retries: -1 })).toThrow(/retries/);
});
