import type { MiddlewareHandler } from "hono";
import type { Logger } from "../obs/log.ts";
import type { Db } from "../store/db.ts";
import { insertAudit } from "../store/jobs.ts";
import type { AppEnv } from "./auth.ts";

/**
 * Every request let through by the admin scope leaves one audit row: who, the method and
 * path, and how it was answered (action admin.request). A route that writes its own audit
 * row on success (cancel, failover, replay…) marks the request `audited`; then only a failed
 * answer gets the generic row, so nothing is written twice.
 *
 * Written after the answer is made, outside the route's transaction: a write the route did
 * is audited in its own transaction already, and a read must not fail for its audit row
 * (a failure here is logged).
 */
export function auditAdminUse(db: Db, log: Logger): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    const p = c.get("principal");
    if (!p?.adminUsed) return;
    const status = c.res.status;
    if (c.get("audited") && status < 400) return;
    try {
      await insertAudit(db, {
        actor: p.actor,
        tenant: p.tenant === "*" ? null : p.tenant,
        action: "admin.request",
        objectId: null,
        reason: null,
        details: { method: c.req.method, path: c.req.path, status },
      });
    } catch (err) {
      log.error({ err, path: c.req.path }, "could not write the audit row of an admin request");
    }
  };
}
