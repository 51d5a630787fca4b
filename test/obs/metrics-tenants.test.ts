// /metrics answers without a token, but tenant names are customer data: series with a tenant
// label only for a scrape with a token for all tenants (or a loopback client when no tokens
// are configured, as the API itself).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { withoutTenantSeries } from "../../src/obs/metrics-view.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { startScheduler } from "../helpers/scheduler.ts";

const ROOT = "root-metrics-scrape-token-0000000000000";
const ACME = "acme-metrics-scrape-token-0000000000000";
const TOKENS = `${ROOT}:*:jobs:read;${ACME}:acme-customer:admin`;

for (const driver of DRIVERS) {
  describe(`tenant labels on /metrics (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      tdb = await freshDb(driver);
      for (const tenant of ["acme-customer", "globex-customer"]) await insertJob(tdb.db, { tenant, due_at: new Date(Date.now() - 60_000) });
      rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS }, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });
    const scrape = async (token?: string) => {
      const res = await fetch(`${rt.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
      expect(res.status).toBe(200);
      return res.text();
    };

    test("no token, a tenant's token or a wrong one: no tenant names; the rest of the metrics are there", async () => {
      for (const token of [undefined, ACME, "wrong-token-wrong-token-wrong-token-00"]) {
        const text = await scrape(token);
        expect(text).not.toContain("customer");
        expect(text).not.toMatch(/tenant="/);
        expect(text).not.toContain("scheduler_tenant_due_backlog");
        expect(text).toContain("scheduler_due_backlog");
      }
    });

    test("a token for all tenants sees the per-tenant series", async () => {
      const text = await scrape(ROOT);
      expect(text).toContain('scheduler_tenant_due_backlog{tenant="acme-customer"} 1');
      expect(text).toContain('scheduler_tenant_due_backlog{tenant="globex-customer"} 1');
    });
  });
}

test("withoutTenantSeries drops tenant samples, and the HELP/TYPE of families left empty", () => {
  const text = [
    "# HELP a_total A.",
    "# TYPE a_total counter",
    'a_total{outcome="x"} 1',
    "# HELP t Per tenant.",
    "# TYPE t gauge",
    't{tenant="acme"} 3',
    't{tenant="other"} 0',
    "# HELP h Mixed.",
    "# TYPE h gauge",
    'h{shard="1",tenant="acme"} 1',
    'h{shard="1"} 2',
    "# HELP e_total No samples yet.",
    "# TYPE e_total counter",
    "",
  ].join("\n");
  expect(withoutTenantSeries(text)).toBe(
    [
      "# HELP a_total A.",
      "# TYPE a_total counter",
      'a_total{outcome="x"} 1',
      "# HELP h Mixed.",
      "# TYPE h gauge",
      'h{shard="1"} 2',
      "# HELP e_total No samples yet.",
      "# TYPE e_total counter",
      "",
    ].join("\n"),
  );
});
