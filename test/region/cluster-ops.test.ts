// Cluster-wide operations are not any one tenant's: a tenant's admin token must not move the
// region authority (every tenant's writes would answer 409 until it moved back), and a move
// to a region where no dispatcher is alive needs force.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";

const T = (name: string) => `${name}-token-for-cluster-ops-test-000000`;
const TOKENS = `${T("acme")}:acme:admin;${T("root")}:*:admin;${T("rd")}:*:jobs:read`;
const as = (name: string) => ({ authorization: `Bearer ${T(name)}` });

for (const driver of DRIVERS) {
  describe(`cluster-wide operations (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    const others: Runtime[] = [];
    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS, REGION: "iad", HOME_REGION: "iad" }, { mode: "api" });
    });
    afterAll(async () => {
      for (const o of others) await o.stop();
      await rt?.stop();
      await tdb?.close();
    });
    const home = async () => (await tdb.db.query<{ home_region: string }>("SELECT home_region FROM region_authority"))[0]!.home_region;

    test("a tenant's admin token gets 403 on POST /v1/cluster/failover, and nothing moves", async () => {
      const r = await api(rt, "POST", "/v1/cluster/failover", { to: "fra", reason: "mine now", force: true }, as("acme"));
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("forbidden");
      expect(r.body.error.message).toContain("all tenants");
      expect((await api(rt, "POST", "/v1/cluster/failover", { to: "fra", force: true }, as("rd"))).status).toBe(403);
      expect(await home()).toBe("iad");
      expect((await tdb.db.query("SELECT 1 FROM audit_log WHERE action = 'cluster.failover'")).length).toBe(0);
    });

    test("a move to a region with no live dispatcher is refused (409) unless forced", async () => {
      const r = await api(rt, "POST", "/v1/cluster/failover", { to: "nowhere", reason: "typo" }, as("root"));
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({ code: "failover_refused" });
      expect(r.body.error.message).toContain("force");
      expect(await home()).toBe("iad");
      const bad = await api(rt, "POST", "/v1/cluster/failover", { to: "nowhere", force: "yes" }, as("root"));
      expect(bad.status).toBe(400);
      expect(bad.body.error.path).toBe("force");
      const forced = await api(rt, "POST", "/v1/cluster/failover", { to: "nowhere", reason: "drill", force: true }, as("root"));
      expect(forced.status).toBe(200);
      expect(await home()).toBe("nowhere");
    });

    test("with a dispatcher alive in the region, the move needs no force", async () => {
      // A standby dispatcher in fra: it marks its presence at start (and every third of the TTL).
      others.push(
        await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS, REGION: "fra", HOME_REGION: "iad", SCHEDULER_AUTO_FAILOVER: "0" }, { mode: "dispatcher" }),
      );
      const r = await api(rt, "POST", "/v1/cluster/failover", { to: "fra", reason: "planned" }, as("root"));
      expect(r.status).toBe(200);
      expect(await home()).toBe("fra");
      // Once it stops, its presence goes with it.
      await others.pop()!.stop();
      const back = await api(rt, "POST", "/v1/cluster/failover", { to: "iad", reason: "back" }, as("root"));
      expect(back.status).toBe(409);
    });
  });
}
