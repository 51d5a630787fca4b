/**
 * Redis for tests. `npm test` starts a throwaway redis-server and sets TEST_REDIS_URL. Test
 * files run in parallel against that one server, so a test never flushes it: each takes a
 * key prefix of its own and deletes only keys under that prefix.
 */
import { RedisClient } from "bun";

export function testRedisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) {
    throw new Error("TEST_REDIS_URL is not set: run npm test, which starts Redis, or set it to a redis:// server where tests may write keys under their own prefix");
  }
  return url;
}

export interface RedisScratch {
  /** A prefix no other test uses; keys of this test start with `${prefix}:`. */
  prefix: string;
  /** A plain client for looking at (and breaking) the keys directly. */
  client: RedisClient;
  /** The keys under the prefix right now. */
  keys(): Promise<string[]>;
  /** Deletes every key under the prefix (a "flush" of this test's data only). */
  wipe(): Promise<void>;
  /** wipe(), then closes the client. */
  cleanup(): Promise<void>;
}

let counter = 0;

export async function redisScratch(label = "t"): Promise<RedisScratch> {
  const prefix = `test:${label}:${process.pid}:${Date.now().toString(36)}:${(counter++).toString(36)}:${crypto.randomUUID().slice(0, 8)}`;
  const client = new RedisClient(testRedisUrl(), { connectionTimeout: 2000, maxRetries: 3 });
  await client.connect();
  const keys = async () => {
    const out: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = (await client.send("SCAN", [cursor, "MATCH", `${escapeGlob(prefix)}:*`, "COUNT", "1000"])) as [string, string[]];
      out.push(...batch);
      cursor = String(next);
    } while (cursor !== "0");
    return out;
  };
  const wipe = async () => {
    const ks = await keys();
    for (let i = 0; i < ks.length; i += 500) await client.send("DEL", ks.slice(i, i + 500));
  };
  return {
    prefix,
    client,
    keys,
    wipe,
    async cleanup() {
      try {
        await wipe();
      } finally {
        client.close();
      }
    },
  };
}

function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** A TCP port on 127.0.0.1 where nothing listens: connections to it are refused at once. */
export async function closedPort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** A TCP server that accepts connections and never answers: a hung server, for timeouts. */
export function silentTcpServer(): { port: number; stop(): void } {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  return { port: s.port, stop: () => s.stop(true) };
}
