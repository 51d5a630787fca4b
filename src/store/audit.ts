import type { Queryable } from "./db.ts";
import type { AuditEntry } from "./jobs.ts";
import { sql } from "./sql.ts";

export interface AuditRow {
  id: number;
  at: Date;
  actor: string;
  tenant: string | null;
  action: string;
  object_id: string | null;
  reason: string | null;
  details: unknown;
}

/** Many audit rows in one statement (a bulk replay writes one per job). */
export async function insertAuditBatch(db: Queryable, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const rows = entries.map((e) => ({
    actor: e.actor,
    tenant: e.tenant,
    action: e.action,
    object_id: e.objectId,
    reason: e.reason,
    details: e.details ?? null,
  }));
  await db.query(sql("InsertAuditBatch"), [JSON.stringify(rows)]);
}

export interface AuditFilter {
  /** null: every tenant (and the rows of no tenant, like region failovers). */
  tenant: string | null;
  /** Rows older than this id (the cursor). */
  beforeId: string | null;
  actionPrefix: string | null;
  objectId: string | null;
  limit: number;
}

/** Newest first. */
export async function listAudit(db: Queryable, f: AuditFilter): Promise<AuditRow[]> {
  if (f.tenant !== null) return db.query<AuditRow>(sql("ListAuditInTenant"), [f.tenant, f.beforeId, f.actionPrefix, f.objectId, f.limit]);
  return db.query<AuditRow>(sql("ListAuditAll"), [f.beforeId, f.actionPrefix, f.objectId, f.limit]);
}
