/**
 * Redis for tests. `npm test` starts a throwaway redis-server and sets TEST_REDIS_URL. Test
 * files run in parallel against that one server, so a test never flushes it: each takes a
 * key prefix of its own and deletes only keys under that prefix.
 */
import { RedisClient } from "bun";

export function testRedisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) {
    throw new Error(
      "TEST_REDIS_URL is not set: run npm test, which starts Redis, or set it to a redis:// server where tests may write keys under their own prefix",
    );
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

/**
 * A redis-server of a test's own, on a free port, without persistence: one a test may flush,
 * break (ACL), SIGKILL and start again on the same port.
 */
export interface OwnRedis {
  port: number;
  url: string;
  /** Starts (or starts again) the server on the same port; resolves once it answers PING. A no-op while it runs. */
  start(): Promise<void>;
  /** SIGKILL: whatever it held is gone (no persistence). */
  kill(): Promise<void>;
  /** Sends one command with a fresh connection and returns the reply. */
  command(cmd: string, args?: string[]): Promise<unknown>;
}

/** `started: false`: the port is chosen but nothing listens yet (Redis down until start()). */
export async function ownRedis(opts: { started?: boolean } = {}): Promise<OwnRedis> {
  const bin = Bun.which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH: install Redis (Debian: apt-get install redis-server); npm test does so when it may");
  const port = await closedPort();
  const url = `redis://127.0.0.1:${port}`;
  let proc: ReturnType<typeof Bun.spawn> | undefined;
  const command = async (cmd: string, args: string[] = []) => {
    const c = new RedisClient(url, { connectionTimeout: 1000, maxRetries: 0, autoReconnect: false });
    try {
      await c.connect();
      return await c.send(cmd, args);
    } finally {
      c.close();
    }
  };
  const self: OwnRedis = {
    port,
    url,
    async start() {
      if (proc && proc.exitCode === null && proc.signalCode === null) return; // running
      const child = Bun.spawn([bin, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore", stderr: "ignore" });
      proc = child;
      // A test process that dies without its afterAll must not leave the server running.
      process.once("exit", () => child.kill("SIGKILL"));
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          if ((await command("PING")) === "PONG") return;
        } catch {
          // not up yet
        }
        if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 10 s`);
        await Bun.sleep(25);
      }
    },
    async kill() {
      if (!proc) return;
      proc.kill("SIGKILL");
      await proc.exited;
      proc = undefined;
    },
    command,
  };
  if (opts.started !== false) await self.start();
  return self;
}
