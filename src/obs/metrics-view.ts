/**
 * /metrics needs no token (scrapers, load balancers), but tenant names are customer data:
 * series with a `tenant` label are shown only to a scrape with a token for all tenants (or,
 * with no tokens configured, a loopback client). Filtering the exposition text keeps this
 * true for any per-tenant family added later, without a second registry.
 */
export function withoutTenantSeries(text: string): string {
  const lines = text.split("\n");
  const kept: string[] = [];
  const withSamples = new Set<string>();
  const dropped = new Set<string>();
  const family = (l: string) => /^# (?:HELP|TYPE) (\S+)/.exec(l)?.[1];
  for (const l of lines) {
    if (l.startsWith("#") || l === "") continue;
    const name = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(l)?.[0] ?? "";
    (/[{,]tenant="/.test(l) ? dropped : withSamples).add(name);
  }
  const of = (names: Set<string>, f: string) => [...names].some((n) => n === f || n.startsWith(`${f}_`));
  for (const l of lines) {
    const f = family(l);
    // A family whose every sample was a tenant's goes whole; an empty one stays as it was.
    if (f !== undefined) {
      if (!of(dropped, f) || of(withSamples, f)) kept.push(l);
      continue;
    }
    if (/[{,]tenant="/.test(l)) continue;
    kept.push(l);
  }
  return kept.join("\n");
}
