/**
 * What a run cost PostgreSQL, from the server's own counters: commits of one database
 * (pg_stat_database) and the statements it ran (pg_stat_statements, when loaded). Read before
 * and after, with every connection of that database closed at both reads: a backend reports
 * its counts to pg_stat_database lazily (up to 10 s late while idle), but always when it exits.
 */
import postgres from "postgres";

export interface CostSnapshot {
  commits: number;
  rollbacks: number;
  /** pg_stat_wal (PostgreSQL 14+): WAL written and full-page images, server-wide. */
  walBytes?: number;
  walFpi?: number;
  /** Statements per normalised query text; undefined without pg_stat_statements. */
  statements?: Map<string, number>;
  /** Execution time (ms) per normalised query text, alongside `statements`. */
  execMs?: Map<string, number>;
  /** Rows returned or changed per normalised query text, alongside `statements`. */
  rows?: Map<string, number>;
}

export interface Cost {
  commits: number;
  rollbacks: number;
  /** WAL bytes and full-page images written meanwhile, by the whole server: the bench runs one system at a time. */
  walBytes?: number;
  walFpi?: number;
  /** All statements but transaction control (BEGIN, COMMIT, ...); undefined without pg_stat_statements. */
  statements?: number;
  /** The statements that ran most, with their counts, their execution time in the server (ms) and the rows they returned or changed. */
  top?: { query: string; calls: number; ms: number; rows: number }[];
}

// BEGIN/COMMIT are the commits, counted already; they would double the statement figure of a
// system that wraps single statements in transactions.
const TRANSACTION_CONTROL = /^\s*(begin|commit|rollback|end|start transaction|savepoint|release)\b/i;

export class PgCost {
  private readonly sql;
  constructor(adminUrl: string) {
    this.sql = postgres(adminUrl, { max: 1, onnotice: () => {}, idle_timeout: 0 });
  }

  async hasStatements(): Promise<boolean> {
    try {
      await this.sql`SELECT 1 FROM pg_stat_statements LIMIT 1`;
      return true;
    } catch {
      return false;
    }
  }

  /** Waits until no backend is connected to the database (or ms pass), so its counts are in. */
  async quiet(db: string, ms = 10_000): Promise<boolean> {
    const end = Date.now() + ms;
    for (;;) {
      const [{ n }] = await this.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${db} AND pid <> pg_backend_pid()`;
      if (n === 0) return true;
      if (Date.now() > end) return false;
      await Bun.sleep(50);
    }
  }

  async snapshot(db: string, statements: boolean): Promise<CostSnapshot> {
    // The stats snapshot of this session would otherwise hold the first read all transaction long.
    await this.sql`SELECT pg_stat_clear_snapshot()`;
    const [row] = await this.sql<
      { c: string; r: string }[]
    >`SELECT xact_commit::text AS c, xact_rollback::text AS r FROM pg_stat_database WHERE datname = ${db}`;
    const snap: CostSnapshot = { commits: Number(row?.c ?? 0), rollbacks: Number(row?.r ?? 0) };
    try {
      const [w] = await this.sql<{ b: string; f: string }[]>`SELECT wal_bytes::text AS b, wal_fpi::text AS f FROM pg_stat_wal`;
      snap.walBytes = Number(w.b);
      snap.walFpi = Number(w.f);
    } catch {
      // Before PostgreSQL 14: no pg_stat_wal, no WAL figures.
    }
    if (statements) {
      const rows = await this.sql<{ query: string; calls: string; ms: number; rows: string }[]>`
        SELECT s.query, sum(s.calls)::text AS calls, sum(s.total_exec_time)::float8 AS ms, sum(s.rows)::text AS rows
        FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = ${db} AND s.toplevel GROUP BY s.query`;
      snap.statements = new Map(rows.map((r) => [r.query, Number(r.calls)]));
      snap.execMs = new Map(rows.map((r) => [r.query, Number(r.ms)]));
      snap.rows = new Map(rows.map((r) => [r.query, Number(r.rows)]));
    }
    return snap;
  }

  close(): Promise<void> {
    return this.sql.end();
  }
}

export function costBetween(a: CostSnapshot, b: CostSnapshot): Cost {
  const cost: Cost = { commits: b.commits - a.commits, rollbacks: b.rollbacks - a.rollbacks };
  if (a.walBytes !== undefined && b.walBytes !== undefined) cost.walBytes = b.walBytes - a.walBytes;
  if (a.walFpi !== undefined && b.walFpi !== undefined) cost.walFpi = b.walFpi - a.walFpi;
  if (a.statements && b.statements) {
    const per: { query: string; calls: number; ms: number; rows: number }[] = [];
    for (const [query, calls] of b.statements) {
      const d = calls - (a.statements.get(query) ?? 0);
      const ms = (b.execMs?.get(query) ?? 0) - (a.execMs?.get(query) ?? 0);
      const rows = (b.rows?.get(query) ?? 0) - (a.rows?.get(query) ?? 0);
      if (d > 0 && !TRANSACTION_CONTROL.test(query)) per.push({ query, calls: d, ms, rows });
    }
    per.sort((x, y) => y.calls - x.calls);
    cost.statements = per.reduce((s, x) => s + x.calls, 0);
    cost.top = per.slice(0, 8);
  }
  return cost;
}
