import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";

export type PrunableStatus = "succeeded" | "cancelled" | "expired" | "dead";

/** Deletes up to `limit` jobs of `status` finished more than `olderThanMs` ago, with their attempts. */
export async function pruneFinishedJobs(db: Queryable, status: PrunableStatus, olderThanMs: number, limit: number): Promise<number> {
  return Number((await db.query<{ n: string | number }>(sql("PruneFinishedJobs"), [status, olderThanMs, limit]))[0]?.n ?? 0);
}

/** Looks at up to `limit` payloads unused for `graceMs`: deletes the unreferenced ones. */
export async function prunePayloads(db: Queryable, graceMs: number, limit: number): Promise<{ seen: number; pruned: number }> {
  const r = (await db.query<{ seen: string | number; pruned: string | number }>(sql("PrunePayloads"), [graceMs, limit]))[0];
  return { seen: Number(r?.seen ?? 0), pruned: Number(r?.pruned ?? 0) };
}

export async function pruneAudit(db: Queryable, olderThanMs: number, limit: number): Promise<number> {
  return Number((await db.query<{ n: string | number }>(sql("PruneAudit"), [olderThanMs, limit]))[0]?.n ?? 0);
}
