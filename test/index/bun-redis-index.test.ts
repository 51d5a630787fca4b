import { expect, test } from "bun:test";
import { BunRedisDueIndex } from "../../src/index/bun-redis-index.ts";
import { closedPort, redisScratch, silentTcpServer, testRedisUrl } from "../helpers/redis.ts";
import { runDueIndexSuite, T0, jid } from "./due-index.conformance.ts";

runDueIndexSuite("bun RedisClient", { writes: "entries", shards: 8, remote: true }, async () => {
  const s = await redisScratch("bunidx");
  const opened: BunRedisDueIndex[] = [];
  const open = (url = testRedisUrl()) => {
    const i = new BunRedisDueIndex({ url, prefix: s.prefix, shards: 8 });
    opened.push(i);
    return i;
  };
  return {
    index: open(),
    reopen: async () => open(),
    flush: () => s.wipe(),
    // Key names spelled out here, not taken from the layout: they are a contract.
    shardSizes: () => Promise.all(Array.from({ length: 8 }, async (_, i) => Number(await s.client.send("ZCARD", [`${s.prefix}:due:${i}`])))),
    async unreachable(how) {
      if (how === "refused") {
        const index = open(`redis://127.0.0.1:${await closedPort()}`);
        return { index, stop: () => index.close() };
      }
      const srv = silentTcpServer();
      const index = open(`redis://127.0.0.1:${srv.port}`);
      return {
        index,
        async stop() {
          await index.close();
          srv.stop();
        },
      };
    },
    async cleanup() {
      for (const i of opened) await i.close();
      await s.cleanup();
    },
  };
});

test("bun RedisClient: a client that gave up reconnects once the server is back", async () => {
  // A private redis-server, so stopping it disturbs no other test.
  const port = await closedPort();
  const start = () =>
    Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdout: "ignore",
      stderr: "ignore",
    });
  const waitUp = async () => {
    for (let i = 0; i < 100; i++) {
      const probe = new BunRedisDueIndex({ url: `redis://127.0.0.1:${port}`, maxRetries: 0 });
      const up = await probe.ping();
      await probe.close();
      if (up) return;
      await Bun.sleep(50);
    }
    throw new Error("redis-server did not start");
  };
  let server = start();
  const index = new BunRedisDueIndex({ url: `redis://127.0.0.1:${port}`, prefix: "restart", shards: 4 });
  try {
    await waitUp();
    await index.entriesUpsert({ entries: [{ jobId: jid(1), dueMs: T0 }] });
    expect(await index.size()).toBe(1);
    server.kill();
    await server.exited;
    // Bun's client runs out of reconnect attempts here and would stay failed.
    const t = performance.now();
    await expect(index.size()).rejects.toThrow();
    expect(performance.now() - t).toBeLessThan(3000);
    expect(await index.ping()).toBe(false);
    server = start();
    await waitUp();
    // A fresh server (no persistence): the index is reachable again, and empty.
    expect(await index.ping()).toBe(true);
    expect(await index.size()).toBe(0);
    await index.entriesUpsert({ entries: [{ jobId: jid(2), dueMs: T0 + 1 }] });
    expect(await index.dueList({ dueBy: T0 + 1, limit: 5 })).toEqual([{ jobId: jid(2), dueMs: T0 + 1 }]);
  } finally {
    await index.close();
    server.kill();
    await server.exited;
  }
});

test("bun RedisClient: options are checked", () => {
  expect(() => new BunRedisDueIndex({ url: testRedisUrl(), shards: 0 })).toThrow(/shards must be an integer in 1\.\.1024/);
  expect(() => new BunRedisDueIndex({ url: testRedisUrl(), shards: 1025 })).toThrow(/shards/);
  expect(() => new BunRedisDueIndex({ url: "https://x.upstash.io" })).toThrow(/UPSTASH_REDIS_REST_URL/);
  expect(() => new BunRedisDueIndex({ url: "" })).toThrow(/REDIS_URL/);
});
