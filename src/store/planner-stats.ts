import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";

/** The tables whose plans the delivery path depends on. */
const HOT_TABLES = ["jobs", "attempts"] as const;
export type HotTableName = (typeof HOT_TABLES)[number];

export interface HotTable {
  table: HotTableName;
  /** Live rows now, as the statistics collector counts them. */
  rows: number;
  /** Rows at the last analyze (-1: never analyzed). */
  analyzedRows: number;
}

/** Hot tables that have at least doubled (and by 1000 rows or more) since their last analyze. */
export async function growingTables(db: Queryable): Promise<HotTable[]> {
  const rows = await db.query<{ table: string; rows: string; analyzed: string }>(sql("GrowingTables"), [HOT_TABLES as unknown as string[]]);
  return rows.map((r) => ({ table: r.table as HotTableName, rows: Number(r.rows), analyzedRows: Number(r.analyzed) }));
}

/** ANALYZE of one hot table (names are ours, never input: an identifier cannot be a parameter). */
export async function analyzeTable(db: Queryable, table: HotTableName): Promise<void> {
  if (!HOT_TABLES.includes(table)) throw new Error(`not a hot table: ${table}`);
  await db.exec(`ANALYZE ${table}`);
}
