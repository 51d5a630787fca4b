import type { MiddlewareHandler } from "hono";
import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "./errors.ts";
import type { Scope, TokenGrant } from "./tokens.ts";

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

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Bearer tokens from SCHEDULER_TOKENS. With none configured the API trusts loopback clients
 * only (a newcomer's machine) and refuses everyone else.
 */
export function authenticate(tokens: TokenGrant[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (tokens.length === 0) {
      const ip = c.env?.server?.requestIP(c.req.raw)?.address;
      if (!isLoopback(ip)) {
        throw new ApiError(403, "forbidden", "no SCHEDULER_TOKENS are configured, so the API serves loopback clients only; set SCHEDULER_TOKENS to allow remote clients");
      }
      c.set("principal", { actor: "local", tenant: "*", scopes: ALL_SCOPES });
      return next();
    }
    const header = c.req.header("authorization") ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) throw new ApiError(401, "unauthorized", "missing bearer token: send Authorization: Bearer <token>", undefined, { "www-authenticate": "Bearer" });
    const grant = tokens.find((t) => sameToken(t.token, m[1].trim()));
    if (!grant) throw new ApiError(401, "unauthorized", "unknown bearer token", undefined, { "www-authenticate": "Bearer" });
    c.set("principal", { actor: tokenActor(grant), tenant: grant.tenant, scopes: grant.scopes });
    return next();
  };
}

export function requireScope(p: Principal, scope: Scope): void {
  if (scope !== "admin" && p.scopes.has(scope)) return;
  if (!p.scopes.has("admin")) throw new ApiError(403, "forbidden", `this token lacks the ${scope} scope`);
  p.adminUsed = true;
}

const actors = new WeakMap<TokenGrant, string>();

/**
 * A token's name in the audit log: its tenant and the first 12 hex digits of its SHA-256,
 * which an operator can compute from a token they hold (`printf %s "$TOKEN" | sha256sum`)
 * but which gives away nothing of the token itself.
 */
export function tokenActor(grant: TokenGrant): string {
  let a = actors.get(grant);
  if (!a) {
    a = `token:${grant.tenant}:${createHash("sha256").update(grant.token).digest("hex").slice(0, 12)}`;
    actors.set(grant, a);
  }
  return a;
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
