import type { MiddlewareHandler } from "hono";
import { createHash, timingSafeEqual } from "node:crypto";
import type { Metrics } from "../obs/metrics.ts";
import type { AuthFailureLimiter } from "./auth-limiter.ts";
import { ApiError } from "./errors.ts";
import type { Scope, TokenGrant } from "./tokens.ts";
import type { TrustedProxies } from "./trusted-proxies.ts";

export interface Principal {
  /** Who, for the audit log: "local", or the token's fingerprint (never the token itself). */
  actor: string;
  /** "*" sees every tenant. */
  tenant: string;
  scopes: ReadonlySet<Scope>;
  /**
   * Set by requireScope when this request was let through by the admin scope (an admin route,
   * or a token standing in with admin for a scope it lacks): the request is then audited.
   */
  adminUsed?: boolean;
}

export type AppEnv = {
  Bindings: { server?: { requestIP(req: Request): { address: string } | null } };
  /**
   * audited: the route writes an audit row of its own when it succeeds, so a successful admin
   * request needs no generic admin.request row (see admin-audit.ts).
   */
  Variables: { principal: Principal; audited?: boolean };
};

const ALL_SCOPES: ReadonlySet<Scope> = new Set(["jobs:read", "jobs:write", "admin"]);

function isLoopback(ip: string | undefined): boolean {
  if (!ip) return false;
  return ip === "::1" || ip.startsWith("127.") || ip.startsWith("::ffff:127.");
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * The grant whose token this is. Digests have one length whatever the tokens' lengths, every
 * grant is compared (no exit at the first match), and timingSafeEqual takes as long for a
 * near miss as for a far one: the time taken says nothing about which token, or which prefix,
 * came close.
 */
interface Grant {
  grant: TokenGrant;
  digest: Buffer;
  actor: string;
}

function matchToken(grants: Grant[], presented: string): Grant | undefined {
  const d = digest(presented);
  let found: Grant | undefined;
  for (const g of grants) {
    const same = timingSafeEqual(d, g.digest);
    found = same ? g : found;
  }
  return found;
}

export interface AuthOptions {
  tokens: TokenGrant[];
  limiter?: AuthFailureLimiter;
  /** Behind a proxy: the header that carries the client's address (its last entry is used). */
  clientIpHeader?: string;
  /** The peers whose clientIpHeader is believed; from anyone else the peer address counts. */
  trustedProxies?: TrustedProxies;
  metrics?: Metrics;
}

/** Who is asking, for the failed-attempt limit: the proxy's header when configured, else the peer. */
function clientOf(c: Parameters<MiddlewareHandler<AppEnv>>[0], header: string | undefined, proxies: TrustedProxies | undefined): string {
  const peer = c.env?.server?.requestIP(c.req.raw)?.address;
  if (header && proxies?.has(peer)) {
    // The last entry is the one the nearest proxy (ours) wrote; earlier ones came from the client.
    const v = c.req.header(header)?.split(",").at(-1)?.trim();
    if (v) return v;
  }
  return peer ?? "unknown";
}

/**
 * Bearer tokens from SCHEDULER_TOKENS. With none configured the API trusts loopback clients
 * only (a newcomer's machine) and refuses everyone else. A client that fails too often is
 * answered 429 for a while (see AuthFailureLimiter).
 */
export function authenticate(o: AuthOptions): MiddlewareHandler<AppEnv> {
  const { tokens, limiter } = o;
  const grants: Grant[] = tokens.map((grant) => ({ grant, digest: digest(grant.token), actor: tokenActor(grant) }));
  const unauthorized = (message: string, client: string) => {
    limiter?.fail(client);
    return new ApiError(401, "unauthorized", message, undefined, { "www-authenticate": "Bearer" });
  };
  return async (c, next) => {
    if (tokens.length === 0) {
      const ip = c.env?.server?.requestIP(c.req.raw)?.address;
      if (!isLoopback(ip)) {
        throw new ApiError(
          403,
          "forbidden",
          "no SCHEDULER_TOKENS are configured, so the API serves loopback clients only; set SCHEDULER_TOKENS to allow remote clients",
        );
      }
      c.set("principal", { actor: "local", tenant: "*", scopes: ALL_SCOPES });
      return next();
    }
    const client = limiter?.enabled ? clientOf(c, o.clientIpHeader, o.trustedProxies) : "";
    const wait = limiter?.enabled ? limiter.blockedFor(client) : 0;
    if (wait > 0) {
      o.metrics?.authThrottled.inc();
      throw new ApiError(429, "too_many_auth_failures", "too many failed authentication attempts from this client; try again later", undefined, {
        "retry-after": String(Math.ceil(wait / 1000)),
      });
    }
    const header = c.req.header("authorization") ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) throw unauthorized("missing bearer token: send Authorization: Bearer <token>", client);
    const found = matchToken(grants, m[1].trim());
    if (!found) throw unauthorized("unknown bearer token", client);
    c.set("principal", { actor: found.actor, tenant: found.grant.tenant, scopes: found.grant.scopes });
    return next();
  };
}

/**
 * For routes outside /v1 that answer everyone but show more to an operator (/metrics): true
 * for a valid token of all tenants, or, with no tokens configured, a loopback client. A
 * wrong token counts as a failed attempt (no guessing tokens through this door).
 */
export function seesAllTenants(o: AuthOptions): (c: Parameters<MiddlewareHandler<AppEnv>>[0]) => boolean {
  const grants: Grant[] = o.tokens.map((grant) => ({ grant, digest: digest(grant.token), actor: tokenActor(grant) }));
  return (c) => {
    if (grants.length === 0) return isLoopback(c.env?.server?.requestIP(c.req.raw)?.address);
    const m = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
    if (!m) return false;
    const client = o.limiter?.enabled ? clientOf(c, o.clientIpHeader, o.trustedProxies) : "";
    if (o.limiter?.enabled && o.limiter.blockedFor(client) > 0) return false;
    const found = matchToken(grants, m[1].trim());
    if (!found) o.limiter?.fail(client);
    return found?.grant.tenant === "*";
  };
}

export function requireScope(p: Principal, scope: Scope): void {
  if (scope !== "admin" && p.scopes.has(scope)) return;
  if (!p.scopes.has("admin")) throw new ApiError(403, "forbidden", `this token lacks the ${scope} scope`);
  p.adminUsed = true;
}

/**
 * Operations that are not of one tenant (region failover, anything across tenants): admin
 * of every tenant only. A tenant's admin token must not be able to stop every other tenant's
 * writes.
 */
export function requireAllTenants(p: Principal): void {
  requireScope(p, "admin");
  if (p.tenant !== "*") throw new ApiError(403, "forbidden", "this operation affects every tenant: it needs an admin token for all tenants (*)");
}

/**
 * A token's name in the audit log: its tenant and the first 12 hex digits of its SHA-256,
 * which an operator can compute from a token they hold (`printf %s "$TOKEN" | sha256sum`)
 * but which gives away nothing of the token itself.
 */
function tokenActor(grant: TokenGrant): string {
  return `token:${grant.tenant}:${createHash("sha256").update(grant.token).digest("hex").slice(0, 12)}`;
}

/** The tenant a query is limited to: null for a token that sees all tenants. */
export function tenantFilter(p: Principal): string | null {
  return p.tenant === "*" ? null : p.tenant;
}

/** The tenant a new object is created in. */
export function tenantForCreate(p: Principal, requested: string | undefined): string {
  if (p.tenant === "*") return requested ?? "default";
  if (requested !== undefined && requested !== p.tenant) throw new ApiError(403, "forbidden", `this token may not create in tenant ${requested}`, "tenant");
  return p.tenant;
}
