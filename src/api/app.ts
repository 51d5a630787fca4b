import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { isMigrated } from "../store/migrate.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { authenticate, seesAllTenants, type AppEnv } from "./auth.ts";
import { withoutTenantSeries } from "../obs/metrics-view.ts";
import { assertStorableUrl } from "./input-guard.ts";
import { TrustedProxies } from "./trusted-proxies.ts";
import { AuthFailureLimiter } from "./auth-limiter.ts";
import { ApiError, errorResponse } from "./errors.ts";
import { jobsRoutes } from "./jobs-routes.ts";
import { schedulesRoutes } from "./schedules-routes.ts";
import { clusterRoutes } from "./cluster-routes.ts";
import { statsRoutes } from "./stats-routes.ts";
import type { StatsHistory } from "../obs/stats-history.ts";
import { asyncRoutes, LEASE_ROUTE } from "./async-routes.ts";
import { dlqRoutes } from "./dlq-routes.ts";
import { auditRoutes } from "./audit-routes.ts";
import { signingKeysRoutes } from "./signing-keys-routes.ts";
import { auditAdminUse } from "./admin-audit.ts";
import type { RegionAuthority } from "../region/authority.ts";
import { openApiRoutes } from "./openapi/openapi-routes.ts";
import { uiRoutes } from "./ui-routes.ts";
import pkg from "../../package.json" with { type: "json" };

export interface AppDeps {
  db: Db;
  config: Config;
  metrics: Metrics;
  log: Logger;
  /** Whether to mount /v1 (api mode) or only health and metrics (dispatcher, worker). */
  serveApi: boolean;
  /** Where home is now (it moves on failover); without, HOME_REGION from the configuration. */
  authority?: RegionAuthority;
  /** Samples for GET /v1/stats's history (api mode). */
  history?: StatsHistory;
}

/** Writes every region serves: moving the authority must work while the home region is down. */
const ANY_REGION_WRITES = new Set(["/v1/cluster/failover"]);

const WRITE = new Set(["POST", "PATCH", "PUT", "DELETE"]);

export function createApp(deps: AppDeps) {
  const { db, config, metrics, log } = deps;
  const app = new Hono<AppEnv>();

  app.onError((err, c) => {
    if (err instanceof ApiError) return errorResponse(c, err);
    log.error({ err, path: c.req.path }, "request failed");
    return errorResponse(c, new ApiError(500, "internal", "internal error; the server log has the details"));
  });
  app.notFound((c) => errorResponse(c, new ApiError(404, "not_found", `no route for ${c.req.method} ${c.req.path}`)));

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", async (c) => {
    const migrated = await isMigrated(db);
    return c.json({ ok: migrated, database: migrated ? "ready" : "unreachable or not migrated" }, migrated ? 200 : 503);
  });
  const limiter = new AuthFailureLimiter(config.authFailures);
  const trustedProxies = new TrustedProxies(config.authFailures.trustedProxies);
  const operator = seesAllTenants({ tokens: config.tokens, limiter, clientIpHeader: config.authFailures.clientIpHeader, trustedProxies });
  app.get("/metrics", async (c) => {
    c.header("content-type", metrics.registry.contentType);
    const text = await metrics.registry.metrics();
    return c.body(operator(c) ? text : withoutTenantSeries(text));
  });

  if (deps.serveApi) {
    // Outside /v1: no token. Documenting a route: src/api/openapi/*-docs.ts.
    app.route("/", openApiRoutes(pkg.version));
    app.route("/", uiRoutes());
    app.use(
      "/v1/*",
      bodyLimit({
        maxSize: config.maxBodyBytes,
        onError: (c) =>
          errorResponse(c, new ApiError(413, "payload_too_large", `request bodies may be at most ${config.maxBodyBytes} bytes (SCHEDULER_MAX_BODY_BYTES)`)),
      }),
    );
    // A NUL in a query parameter or the path would reach SQL as text: refused up front.
    app.use("/v1/*", async (c, next) => {
      assertStorableUrl(c.req.url);
      return next();
    });
    const auth = authenticate({ tokens: config.tokens, limiter, clientIpHeader: config.authFailures.clientIpHeader, trustedProxies, metrics });
    // An async job's target is not an API user: its lease token (checked by the route) is
    // its credential. The home-region check below still applies: these are writes.
    app.use("/v1/*", (c, next) => (LEASE_ROUTE.test(c.req.path) ? next() : auth(c, next)));
    app.use("/v1/*", auditAdminUse(db, log));
    // Only the home region writes; Fly's proxy replays the request there.
    app.use("/v1/*", async (c, next) => {
      let home = deps.authority?.current?.homeRegion ?? config.homeRegion;
      if (WRITE.has(c.req.method) && config.region !== home && !ANY_REGION_WRITES.has(c.req.path)) {
        // The cached row may lag a move that just committed (this region's own takeover, a
        // failover): before refusing, read the row again; refusals are rare, the read is one.
        if (deps.authority) home = (await deps.authority.reread())?.homeRegion ?? home;
      }
      if (WRITE.has(c.req.method) && config.region !== home && !ANY_REGION_WRITES.has(c.req.path)) {
        throw new ApiError(409, "not_home_region", `writes go to the home region ${home}`, undefined, { "fly-replay": `region=${home}` });
      }
      return next();
    });
    app.route("/v1", clusterRoutes({ db, config }));
    app.route("/v1", asyncRoutes({ db, config, metrics, log }));
    app.route("/v1", jobsRoutes({ db, config }));
    app.route("/v1", schedulesRoutes({ db, config }));
    app.route("/v1", statsRoutes({ db, config, history: deps.history }));
    app.route("/v1", dlqRoutes({ db, config, metrics }));
    app.route("/v1", auditRoutes(db));
    app.route("/v1", signingKeysRoutes({ db }));
  }
  return app;
}
