/**
 * Every scheduler session asks the server for idle_in_transaction_session_timeout = the lease
 * TTL as a startup parameter (test/races/paused-holder.test.ts says why). A pooler such as
 * PgBouncer refuses a startup parameter it does not know, on every connection: the scheduler
 * must then still start, without the parameter, and say so in one line with what to do.
 *
 * The pooler here is a small TCP proxy in front of the real test server that answers a
 * startup packet naming that parameter as PgBouncer does (FATAL, 08P01, "unsupported startup
 * parameter: …") and passes every other connection through. PostgreSQL only.
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

function fakePooler(upstreamPort: number): { server: TCPSocketListener<Conn>; refused: string[] } {
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
        const bad = [...p.params.keys()].find((k) => k === PARAM);
        if (bad) {
          refused.push(bad);
          s.write(fatal(`unsupported startup parameter: ${bad}`));
          s.end();
          return;
        }
        const first = c.buf;
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

describe("a pooler that refuses unknown startup parameters (postgres)", () => {
  let url: string;
  let pooler: ReturnType<typeof fakePooler>;
  beforeAll(async () => {
    url = await createDatabase({ migrated: true });
    pooler = fakePooler(Number(new URL(url).port));
  });
  afterAll(async () => {
    pooler.server.stop(true);
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

  test("through the pooler: it starts without the parameter and says so in one line, with what to do", async () => {
    const through = new URL(url);
    through.port = String(pooler.server.port);
    const warned: string[] = [];
    const db = await openDb(config(through.toString()), "scheduler-test", undefined, (m) => warned.push(m));
    try {
      expect(pooler.refused).toEqual([PARAM]);
      expect(await setting(db)).toBe("0"); // the server's default: the pooler's connections work
      expect(await db.query("SELECT count(*)::int AS n FROM jobs")).toEqual([{ n: 0 }]);
      expect(warned).toHaveLength(1);
      expect(warned[0]).not.toContain("\n");
      expect(warned[0]).toContain(`refused ${PARAM} as a startup parameter`);
      expect(warned[0]).toContain("ignore_startup_parameters");
      expect(warned[0]).toContain("4000ms");
    } finally {
      await db.close();
    }
  });
});
