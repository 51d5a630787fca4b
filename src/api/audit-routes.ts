import { Hono } from "hono";
import { listAudit, type AuditRow } from "../store/audit.ts";
import type { Db } from "../store/db.ts";
import { type AppEnv, requireScope, tenantFilter } from "./auth.ts";
import { badRequest } from "./errors.ts";
import { queryInt } from "./request.ts";

export function auditView(a: AuditRow) {
  return {
    id: a.id,
    at: a.at.toISOString(),
    actor: a.actor,
    tenant: a.tenant,
    action: a.action,
    object_id: a.object_id,
    reason: a.reason,
    details: a.details ?? null,
  };
}

/**
 * GET /v1/audit (admin): who did what, when and why, newest first. A tenant's admin sees its
 * tenant's rows; a token of every tenant sees all (with ?tenant= to narrow), including rows of
 * no tenant (region failovers, admin requests by such tokens). Filters: action (a prefix:
 * "dlq.", "job.cancelled"), object_id.
 */
export function auditRoutes(db: Db) {
  const app = new Hono<AppEnv>();
  app.get("/audit", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const q = c.req.query();
    const limit = queryInt("limit", q.limit, 1, 1000, 100);
    let beforeId: string | null = null;
    if (q.cursor) {
      beforeId = Buffer.from(q.cursor, "base64url").toString();
      // An id is a bigint: past 2^63 - 1 the database would fail the cast (a 500).
      if (!/^\d{1,19}$/.test(beforeId) || BigInt(beforeId) > 9223372036854775807n) throw badRequest("cursor is not one this API gave out", "cursor");
    }
    const rows = await listAudit(db, {
      tenant: tenantFilter(p) ?? (q.tenant || null),
      beforeId,
      actionPrefix: q.action || null,
      objectId: q.object_id || null,
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return c.json({
      items: page.map(auditView),
      next_cursor: rows.length > limit && last ? Buffer.from(String(last.id)).toString("base64url") : null,
    });
  });
  return app;
}
