import type { Db } from "../store/db.ts";
import { analyzeTable, growingTables, type HotTable } from "../store/planner-stats.ts";
import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

export interface TableAnalyzerOptions {
  db: Db;
  log: Logger;
  /** Only the dispatch leader looks: one analyzer at a time. */
  isLeader: () => boolean;
  intervalMs?: number;
}

/** How often the leader looks at the hot tables' sizes. */
const INTERVAL_MS = 2_000;

/**
 * Keeps the planner's statistics of the delivery path's tables current while they grow.
 *
 * Hot statements are prepared, and PostgreSQL keeps a prepared statement's generic plan until
 * the table's statistics change. Made while `attempts` was nearly empty (a new database, the
 * first burst), that plan read it with a sequential scan per batch of outcomes while it grew by
 * thousands of rows a second, and autovacuum's analyze comes a minute or more later. Planning
 * every call instead costs about a millisecond a statement. So the leader analyzes a hot
 * table whenever it has doubled since its last analyze: a handful of times while a table
 * grows from nothing, never for a table of a steady size (autovacuum's job).
 */
export class TableAnalyzer extends PeriodicLoop<void> {
  constructor(private readonly o: TableAnalyzerOptions) {
    super("table-analyzer", o.log);
  }

  async runOnce(): Promise<void> {
    if (!this.o.isLeader() || this.o.db.kind !== "postgres") return;
    const tables: HotTable[] = await growingTables(this.o.db);
    for (const t of tables) {
      const started = performance.now();
      await analyzeTable(this.o.db, t.table);
      this.o.log.debug(
        { table: t.table, rows: t.rows, analyzed_rows: t.analyzedRows, ms: Math.round(performance.now() - started) },
        "analyzed a growing table",
      );
    }
  }

  protected nextDelayMs(): number {
    return (this.o.intervalMs ?? INTERVAL_MS) * (0.8 + Math.random() * 0.4);
  }
}
