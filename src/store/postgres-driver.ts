import postgres from "postgres";
import type { Db, Queryable, Tx } from "./db.ts";
import { parseInt8 } from "./int8.ts";

export interface PostgresDriverOptions {
  url: string;
  maxConnections?: number;
  /** Application name shown in pg_stat_activity; helps tell processes apart. */
  applicationName?: string;
  /**
   * The server ends a session left idle inside a transaction for longer than this (ms;
   * idle_in_transaction_session_timeout). A process paused or cut off mid-transaction keeps
   * its row locks until its session ends, and the server may take hours to notice a client
   * that is gone: a takeover waited behind those locks for as long (issue 15, session 30).
   */
  idleInTransactionTimeoutMs?: number;
}

// Timestamps come back as Date; int8 as a number (int8.ts: refused, not rounded, beyond 2^53),
// the same on both drivers, so rows reach the code typed once.
export function openPostgres(opts: PostgresDriverOptions): Db {
  const sql = postgres(opts.url, {
    max: opts.maxConnections ?? 10,
    onnotice: () => {},
    // Parameters are sent as before (the driver's default is the same text).
    types: { int8: { to: 20, from: [20], parse: parseInt8, serialize: (x: unknown) => `${x}` } },
    connection: {
      application_name: opts.applicationName ?? "scheduler",
      ...(opts.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: Math.ceil(opts.idleInTransactionTimeoutMs) } : {}),
    },
    // Cancelled statements and idle connections should not keep a crashed peer's locks.
    idle_timeout: 60,
    // Seconds before reconnecting. The driver's default grows with every failed connect of
    // the pool up to 20 s, so a server down for two seconds left the process idle for ~20 s
    // after it came back; capped at 1 s, it is back within about a second.
    backoff: (retries: number) => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, 1),
  });
  const run = (s: postgres.Sql | postgres.TransactionSql): Queryable => ({
    query: async <T>(text: string, params: unknown[] = []) =>
      (await s.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true })) as unknown as T[],
    exec: async (text: string) => {
      await s.unsafe(text).simple();
    },
  });
  const runTx = (t: postgres.TransactionSql): Tx => ({
    ...run(t),
    savepoint: <T>(fn: (q: Queryable) => Promise<T>) => t.savepoint((s) => fn(run(s))) as Promise<T>,
  });
  const base = run(sql);
  return {
    kind: "postgres",
    query: base.query,
    exec: base.exec,
    tx: <T>(fn: (q: Tx) => Promise<T>) => sql.begin((t) => fn(runTx(t))) as Promise<T>,
    async listen(channel, onNotify, onListen) {
      const sub = await sql.listen(channel, (payload) => onNotify(payload), onListen);
      return () => sub.unlisten();
    },
    close: () => sql.end({ timeout: 5 }),
  };
}
