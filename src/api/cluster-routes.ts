import { Hono } from "hono";
import * as v from "valibot";
import type { Config } from "../config.ts";
import { fencingToken } from "../region/fencing.ts";
import { AuthorityMoveRefused, liveDispatchersIn, moveAuthority, readAuthority, type AuthorityRow } from "../store/authority.ts";
import type { Db } from "../store/db.ts";
import { shardState, type ShardRow } from "../store/shards.ts";
import { type AppEnv, requireAllTenants, requireScope } from "./auth.ts";
import { ApiError, conflict } from "./errors.ts";
import { parseOrThrow } from "./job-input.ts";
import { readJson, REASON } from "./request.ts";

export interface ClusterRoutesDeps {
  db: Db;
  config: Pick<Config, "region" | "authorityTtlMs" | "clockSkewMs" | "autoFailover" | "shards">;
}

export const REGION_NAME = v.pipe(v.string("must be a string"), v.regex(/^[a-z0-9-]{1,32}$/, "must be a region name like iad or local"));
export const FailoverSchema = v.strictObject({
  to: REGION_NAME,
  reason: REASON,
  /** Move even though no dispatcher of `to` is alive (nothing would dispatch until one starts). */
  force: v.optional(v.boolean("must be true or false"), false),
});

/** The cluster as this process sees it: GET /v1/cluster, and the CLI's output. */
export function clusterView(row: AuthorityRow, config: ClusterRoutesDeps["config"]) {
  return {
    region: config.region,
    home_region: row.homeRegion,
    // The token the current dispatch leader stamps on its calls (term 0: none elected yet
    // in this generation).
    epoch: fencingToken(row.generation, row.leader ? row.leaderTerm : 0),
    generation: row.generation,
    role: row.homeRegion === config.region ? "home" : "standby",
    leader: row.leader,
    lease_until: row.leaseUntil.toISOString(),
    holder: row.holder,
    auto_failover: config.autoFailover,
    // When a standby may take over if the home region stops renewing.
    takeover_after: config.autoFailover ? new Date(row.leaseUntil.getTime() + config.authorityTtlMs + config.clockSkewMs).toISOString() : null,
    changed_at: row.changedAt.toISOString(),
  };
}

/**
 * The dispatch shards: each with its holder, its fencing token and since when it is held
 * (null owner: free, being handed over), and how many each live dispatcher holds.
 */
export function shardsView(rows: ShardRow[], generation: number, live: number) {
  const held = (r: ShardRow) => r.owner !== null && r.leaseUntil !== null && !r.free;
  const owners: Record<string, number> = {};
  for (const r of rows) if (held(r)) owners[r.owner!] = (owners[r.owner!] ?? 0) + 1;
  return {
    dispatchers: live,
    shard_owners: owners,
    shards: rows.map((r) => ({
      shard: r.shard,
      owner: held(r) ? r.owner : null,
      epoch: held(r) ? fencingToken(generation, r.epoch) : null,
      since: held(r) ? (r.acquiredAt?.toISOString() ?? null) : null,
      lease_until: held(r) ? r.leaseUntil!.toISOString() : null,
    })),
  };
}

export function clusterRoutes(deps: ClusterRoutesDeps) {
  const { db, config } = deps;
  const app = new Hono<AppEnv>();
  const read = async () => {
    const row = await readAuthority(db);
    if (!row) throw new ApiError(503, "no_authority", "the region authority is not seeded yet; it is on the first start of a scheduler");
    return row;
  };

  app.get("/cluster", async (c) => {
    requireScope(c.get("principal"), "jobs:read");
    const [row, shards] = await Promise.all([read(), shardState(db, config.shards, config.clockSkewMs)]);
    return c.json({ ...clusterView(row, config), ...shardsView(shards.shards, row.generation, shards.live) });
  });

  // Served in every region: the home region may be the one that is down.
  app.post("/cluster/failover", async (c) => {
    const p = c.get("principal");
    requireAllTenants(p);
    const body = parseOrThrow(FailoverSchema, await readJson(c));
    // A typo'd or empty region would take every write of every tenant with it.
    if (!body.force && (await liveDispatchersIn(db, body.to)) === 0) {
      throw conflict(
        "failover_refused",
        `no dispatcher of region ${body.to} is alive: nothing would dispatch there; start one first, or pass "force": true to move anyway`,
      );
    }
    c.set("audited", true);
    try {
      const moved = await moveAuthority(db, {
        to: body.to,
        ttlMs: config.authorityTtlMs,
        action: "cluster.failover",
        by: { actor: p.actor, reason: body.reason ?? null },
      });
      return c.json({ failover: moved, cluster: clusterView(await read(), config) });
    } catch (err) {
      if (err instanceof AuthorityMoveRefused) throw conflict("failover_refused", err.message);
      throw err;
    }
  });
  return app;
}
