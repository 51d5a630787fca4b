/**
 * Every scheduler session asks the server for idle_in_transaction_session_timeout = the lease
 * TTL as a startup parameter (test/races/paused-holder.test.ts says why). A pooler such as
 * PgBouncer refuses a startup parameter it does not know, on every connection: the scheduler
 * must then still start, without the parameter, and say so in one line with what to do.
 *
 * The pooler here is a small TCP proxy in front of the real test server. Refusing, it answers
 * a startup packet naming that parameter as PgBouncer does (FATAL, 08P01, "unsupported
 * startup parameter: …"); ignoring (PgBouncer's ignore_startup_parameters), it passes the
 * connection on without the parameter. PostgreSQL only.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { openDb } from "../../src/store/open.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";

const PARAM = "idle_in_transaction_session_timeout";

/** The startup packet's parameters, or undefined when `buf` does not hold a whole startup packet yet. */
function startupParams(buf: Buffer): { length: number; ssl: boolean; params: Map<string, string> } | undefined {
  if (buf.length < 8) return undefined;
  const length = buf.readInt32BE(0);
  if (buf.length < length) return undefined;
  const code = buf.readInt32BE(4);
  const params = new Map<string, string>();
  if (code === 80877103) return { length, ssl: true, params }; // SSLRequest
  const parts = buf
    .subarray(8, length - 1)
    .toString("utf8")
    .split("\0");
  for (let i = 0; i + 1 < parts.length; i += 2) params.set(parts[i]!, parts[i + 1]!);
  return { length, ssl: false, params };
}

function fatal(message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C08P01\0M${message}\0\0`, "utf8");
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

interface Conn {
  buf: Buffer;
  upstream?: Socket<undefined>;
  /** The upstream connection is being made: what the client sends meanwhile waits here. */
  connecting: boolean;
  pending: Buffer[];
}

/** A startup packet (protocol 3.0) with these parameters. */
function startupPacket(params: Map<string, string>): Buffer {
  const body = Buffer.from(`${[...params].map(([k, v]) => `${k}\0${v}\0`).join("")}\0`, "utf8");
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + body.length, 0);
  head.writeInt32BE(196608, 4);
  return Buffer.concat([head, body]);
}

function fakePooler(upstreamPort: number, mode: "refuse" | "ignore"): { server: TCPSocketListener<Conn>; refused: string[] } {
  const refused: string[] = [];
  const server = Bun.listen<Conn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(s) {
        s.data = { buf: Buffer.alloc(0), connecting: false, pending: [] };
      },
      async data(s, chunk) {
        const c = s.data;
        if (c.upstream) {
          c.upstream.write(chunk);
          return;
        }
        if (c.connecting) {
          c.pending.push(Buffer.from(chunk));
          return;
        }
        c.buf = Buffer.concat([c.buf, chunk]);
        const p = startupParams(c.buf);
        if (!p) return;
        if (p.ssl) {
          c.buf = c.buf.subarray(p.length);
          s.write("N"); // no TLS here: the client goes on in the clear
          return;
        }
        let first = c.buf;
        if (p.params.has(PARAM)) {
          refused.push(PARAM);
          if (mode === "refuse") {
            s.write(fatal(`unsupported startup parameter: ${PARAM}`));
            s.end();
            return;
          }
          p.params.delete(PARAM);
          first = Buffer.concat([startupPacket(p.params), c.buf.subarray(p.length)]);
        }
        c.connecting = true;
        const up = await Bun.connect<undefined>({
          hostname: "127.0.0.1",
          port: upstreamPort,
          socket: {
            data(_u, d) {
              s.write(d);
            },
            close() {
              s.end();
            },
            error() {
              s.end();
            },
          },
        });
        up.write(first);
        for (const b of c.pending) up.write(b);
        c.pending = [];
        c.connecting = false;
        c.upstream = up;
      },
      close(s) {
        s.data.upstream?.end();
      },
    },
  });
  return { server, refused };
}

describe("a pooler in front of the server (postgres)", () => {
  let url: string;
  let pooler: ReturnType<typeof fakePooler>;
  let ignoring: ReturnType<typeof fakePooler>;
  beforeAll(async () => {
    url = await createDatabase({ migrated: true });
    pooler = fakePooler(Number(new URL(url).port), "refuse");
    ignoring = fakePooler(Number(new URL(url).port), "ignore");
  });
  afterAll(async () => {
    pooler.server.stop(true);
    ignoring.server.stop(true);
    await dropDatabase(url);
  });

  const config = (databaseUrl: string) => ({ databaseUrl, dataDir: "", workerConcurrency: 1, leaderTtlMs: 4000 });
  const setting = async (db: Awaited<ReturnType<typeof openDb>>) => (await db.query<{ v: string }>(`SELECT current_setting('${PARAM}') AS v`))[0]!.v;

  test("directly: the sessions carry the lease TTL as their idle-in-transaction timeout, and nothing is said", async () => {
    const warned: string[] = [];
    const db = await openDb(config(url), "scheduler-test", undefined, (m) => warned.push(m));
    try {
      expect(await setting(db)).toBe("4s");
      expect(warned).toEqual([]);
    } finally {
      await db.close();
    }
  });

  const via = (p: ReturnType<typeof fakePooler>) => {
    const through = new URL(url);
    through.port = String(p.server.port);
    return through.toString();
  };

  test("through a pooler that refuses it: it starts without the parameter and says so in one line, with what to do", async () => {
    const warned: string[] = [];
    const db = await openDb(config(via(pooler)), "scheduler-test", undefined, (m) => warned.push(m));
    try {
      expect(pooler.refused).toEqual([PARAM]);
      expect(await setting(db)).toBe("0"); // the server's default: the pooler's connections work
      expect(await db.query("SELECT count(*)::int AS n FROM jobs")).toEqual([{ n: 0 }]);
      expect(warned).toHaveLength(1);
      expect(warned[0]).not.toContain("\n");
      expect(warned[0]).toContain(`refused ${PARAM} as a startup parameter`);
      expect(warned[0]).toContain("ALTER ROLE … SET idle_in_transaction_session_timeout = '4000ms'");
    } finally {
      await db.close();
    }
  });

  test("through a pooler that ignores it: the sessions run without it, and that is said in one line", async () => {
    const warned: string[] = [];
    const db = await openDb(config(via(ignoring)), "scheduler-test", undefined, (m) => warned.push(m));
    try {
      expect(ignoring.refused.length).toBeGreaterThan(0);
      expect(await setting(db)).toBe("0");
      expect(warned).toHaveLength(1);
      expect(warned[0]).not.toContain("\n");
      expect(warned[0]).toContain("idle_in_transaction_session_timeout = 0ms, not the lease TTL (4000ms)");
    } finally {
      await db.close();
    }
  });
});
