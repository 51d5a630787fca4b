export type Scope = "jobs:read" | "jobs:write" | "admin";
const SCOPES: readonly string[] = ["jobs:read", "jobs:write", "admin"];

export interface TokenGrant {
  token: string;
  /** "*" sees every tenant. */
  tenant: string;
  scopes: Set<Scope>;
}

/**
 * `token:tenant:scope,scope;…` — split on the first two colons only, because scopes
 * themselves contain colons.
 */
export function parseTokens(spec: string): TokenGrant[] {
  const grants: TokenGrant[] = [];
  for (const [i, raw] of spec.split(";").entries()) {
    const entry = raw.trim();
    if (!entry) continue;
    const a = entry.indexOf(":");
    const b = a < 0 ? -1 : entry.indexOf(":", a + 1);
    if (a <= 0 || b < 0) throw new Error(`entry ${i + 1} must look like token:tenant:scope,scope`);
    const token = entry.slice(0, a);
    const tenant = entry.slice(a + 1, b);
    const scopes = entry
      .slice(b + 1)
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (!tenant) throw new Error(`entry ${i + 1} has an empty tenant (use * for all tenants)`);
    if (scopes.length === 0) throw new Error(`entry ${i + 1} has no scopes (jobs:read, jobs:write, admin)`);
    for (const s of scopes) {
      if (!SCOPES.includes(s)) throw new Error(`entry ${i + 1} has unknown scope ${JSON.stringify(s)} (jobs:read, jobs:write, admin)`);
    }
    if (grants.some((g) => g.token === token)) throw new Error(`entry ${i + 1} repeats a token`);
    grants.push({ token, tenant, scopes: new Set(scopes as Scope[]) });
  }
  if (grants.length === 0) throw new Error("holds no token");
  return grants;
}
