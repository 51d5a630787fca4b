import { Hono } from "hono";
import type { Config } from "../config.ts";
import { OVERDUE_MS } from "../obs/gauge-snapshot.ts";
import type { StatsHistory } from "../obs/stats-history.ts";
import { readAuthority } from "../store/authority.ts";
import type { Db } from "../store/db.ts";
import { readStats } from "../store/stats.ts";
import { dueBacklogByTenant } from "../store/metrics-queries.ts";
import { type AppEnv, requireScope, tenantFilter } from "./auth.ts";
import { clusterView } from "./cluster-routes.ts";
import { queryInt } from "./request.ts";

export interface StatsRoutesDeps {
  db: Db;
  config: Pick<Config, "region" | "authorityTtlMs" | "clockSkewMs" | "autoFailover" | "shards">;
  history?: StatsHistory;
}

/**
 * GET /v1/stats: the health facts on one page (what `scheduler status` and the dashboard
 * show). A tenant's token sees its tenant's figures; the cluster-wide history and the
 * per-tenant backlog only with a token for all tenants.
 */
export function statsRoutes(deps: StatsRoutesDeps) {
  const app = new Hono<AppEnv>();
  app.get("/stats", async (c) => {
    const p = c.get("principal");
    requireScope(p, "jobs:read");
    const tenant = tenantFilter(p);
    const windowS = queryInt("window", c.req.query("window"), 10, 3600, 300);
    const [stats, authority, tenants] = await Promise.all([
      readStats(deps.db, { tenant, overdueMs: OVERDUE_MS, windowS }),
      readAuthority(deps.db),
      tenant === null ? dueBacklogByTenant(deps.db, 10) : Promise.resolve([]),
    ]);
    return c.json({
      at: new Date().toISOString(),
      tenant,
      ...stats,
      overdue_after_seconds: OVERDUE_MS / 1000,
      tenants_due_backlog: tenants.map((r) => ({ tenant: r.tenant, due_backlog: r.n })),
      cluster: authority ? clusterView(authority, deps.config) : null,
      history: tenant === null ? (deps.history?.samples() ?? []) : [],
    });
  });
  return app;
}
