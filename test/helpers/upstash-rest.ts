/**
 * A small server that speaks the Upstash Redis REST protocol in front of a real redis-server,
 * so @upstash/redis can be tested without Upstash:
 *
 *   POST /            body ["ZADD","k","1","m"]        → {"result": …} | 400 {"error": "…"}
 *   POST /pipeline    body [["PING"],["GET","k"],…]    → [{"result": …} | {"error": "…"}, …]
 *   POST /multi-exec  same body, run in MULTI/EXEC     → same shape; EXECABORT → 400 {"error"}
 *
 * Auth is `Authorization: Bearer <token>` (401 otherwise). With `Upstash-Encoding: base64`
 * (which @upstash/redis always sends) every string in a result is base64 of its UTF-8 bytes,
 * except a top-level "OK"; integers stay numbers, null stays null, arrays are encoded
 * element by element.
 *
 * Its own connections speak RESP2 (`HELLO 2`), so replies are flat arrays of strings and
 * integers, as from the real REST API (RESP3 would give pairs, maps and doubles). Arguments
 * are sent as strings (the client sends numbers as JSON numbers). Bun's client would
 * reconnect in RESP3 behind our back, so auto-reconnect is off and each request reconnects
 * (and says HELLO 2) when needed.
 */
import { RedisClient } from "bun";

export interface UpstashRestFixture {
  /** http://127.0.0.1:<port> */
  url: string;
  token: string;
  /** Every request served: its path, how many commands it carried and its body size. */
  requests: { path: string; commands: number; bytes: number }[];
  stop(): Promise<void>;
}

type Reply = { result: unknown } | { error: string };

export async function startUpstashRest(opts: { redisUrl: string; token?: string }): Promise<UpstashRestFixture> {
  const token = opts.token ?? `tok_${crypto.randomUUID()}`;
  const main = new Resp2Connection(opts.redisUrl);
  const multi = new Resp2Connection(opts.redisUrl);
  // One transaction at a time on the MULTI connection.
  let multiQueue: Promise<unknown> = Promise.resolve();
  const requests: UpstashRestFixture["requests"] = [];

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (req.headers.get("authorization") !== `Bearer ${token}`) return json(401, { error: "Unauthorized" });
      if (req.method !== "POST") return json(405, { error: "only POST is supported here" });
      const base64 = req.headers.get("upstash-encoding")?.toLowerCase() === "base64";
      const path = new URL(req.url).pathname.replace(/\/+$/, "") || "/";
      let body: unknown;
      let bytes = 0;
      try {
        const text = await req.text();
        bytes = text.length;
        body = JSON.parse(text);
      } catch {
        return json(400, { error: "ERR the request body is not valid JSON" });
      }
      try {
        if (path === "/") {
          const cmd = toCommand(body);
          requests.push({ path, commands: 1, bytes });
          const r = await run(main, cmd);
          return "error" in r ? json(400, r) : json(200, encodeReply(r, base64));
        }
        if (path === "/pipeline" || path === "/multi-exec") {
          if (!Array.isArray(body) || body.length === 0) return json(400, { error: "ERR a pipeline is a non-empty array of commands" });
          const cmds = body.map(toCommand);
          requests.push({ path, commands: cmds.length, bytes });
          if (path === "/pipeline") {
            const replies = await Promise.all(cmds.map((c) => run(main, c)));
            return json(
              200,
              replies.map((r) => encodeReply(r, base64)),
            );
          }
          const done = multiQueue.then(() => transaction(multi, cmds));
          multiQueue = done.catch(() => {});
          const replies = await done;
          return json(
            200,
            replies.map((r) => encodeReply(r, base64)),
          );
        }
        return json(404, { error: `ERR unknown path ${path}` });
      } catch (err) {
        if (err instanceof BadRequest) return json(400, { error: err.message });
        if (err instanceof RedisReplyError) return json(400, { error: err.message });
        return json(500, { error: `ERR fixture: ${(err as Error).message}` });
      }
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    token,
    requests,
    async stop() {
      await server.stop(true);
      main.close();
      multi.close();
    },
  };
}

class BadRequest extends Error {}
class RedisReplyError extends Error {}

function toCommand(v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0) throw new BadRequest("ERR a command is a non-empty JSON array");
  return v.map((a) => {
    if (typeof a === "string") return a;
    if (typeof a === "number" || typeof a === "boolean") return String(a);
    throw new BadRequest(`ERR command arguments must be strings or numbers, got ${JSON.stringify(a)}`);
  });
}

async function run(conn: Resp2Connection, [name, ...args]: string[]): Promise<Reply> {
  const client = await conn.get();
  try {
    return { result: await client.send(name, args) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

async function transaction(conn: Resp2Connection, cmds: string[][]): Promise<Reply[]> {
  const client = await conn.get();
  await client.send("MULTI", []);
  let execd = false;
  try {
    // Queueing errors (unknown command, wrong arity) make EXEC abort; keep queueing so
    // Redis decides, as it would for any client.
    for (const [name, ...args] of cmds) await client.send(name, args).catch(() => {});
    execd = true;
    let replies: unknown;
    try {
      replies = await client.send("EXEC", []);
    } catch (err) {
      throw new RedisReplyError((err as Error).message);
    }
    if (!Array.isArray(replies)) throw new RedisReplyError("ERR transaction aborted");
    return replies.map((r): Reply => (r instanceof Error ? { error: r.message } : { result: r }));
  } finally {
    if (!execd) await client.send("DISCARD", []).catch(() => {});
  }
}

function encodeReply(r: Reply, base64: boolean): Reply {
  if ("error" in r) return r;
  if (!base64) return { result: r.result ?? null };
  if (r.result === "OK") return { result: "OK" };
  return { result: encodeValue(r.result) };
}

function encodeValue(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return Buffer.from(v, "utf8").toString("base64");
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (Array.isArray(v)) return v.map(encodeValue);
  throw new Error(`cannot encode a ${typeof v} reply (${Object.prototype.toString.call(v)})`);
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** A RedisClient that is always in RESP2 when handed out. */
class Resp2Connection {
  private readonly client: RedisClient;
  private resp2 = false;
  private opening: Promise<void> | undefined;

  constructor(url: string) {
    this.client = new RedisClient(url, { autoReconnect: false, connectionTimeout: 2000 });
    this.client.onclose = () => {
      this.resp2 = false;
    };
  }

  async get(): Promise<RedisClient> {
    if (!(this.client.connected && this.resp2)) {
      this.opening ??= (async () => {
        try {
          if (!this.client.connected) await this.client.connect();
          await this.client.send("HELLO", ["2"]);
          this.resp2 = true;
        } finally {
          this.opening = undefined;
        }
      })();
      await this.opening;
    }
    return this.client;
  }

  close(): void {
    this.client.close();
  }
}
