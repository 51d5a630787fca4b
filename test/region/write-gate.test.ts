// The API's home-region gate reads a cached authority row, refreshed on NOTIFY and every
// third of the authority TTL. A move it has not seen yet (here: the row changed with no
// notification, and a 60 s TTL so no refresh comes for 20 s) must not make the new home
// refuse writes with 409 + fly-replay to the old one: it reads the row again before refusing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";

for (const driver of DRIVERS) {
  describe(`the home-region write gate (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "iad");
      rt = await startScheduler(t.db, { REGION: "fra", HOME_REGION: "iad", SCHEDULER_AUTHORITY_TTL: "60s" }, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
    });

    test("a standby refuses writes; right after the authority moved to it, unseen, it accepts them", async () => {
      const body = { target: { url: "https://example.com/hook" }, delay: "1h" };
      const refused = await api(rt, "POST", "/v1/jobs", body);
      expect(refused.status).toBe(409);
      await t.db.query("UPDATE region_authority SET home_region = 'fra', generation = generation + 1");
      const accepted = await api(rt, "POST", "/v1/jobs", body);
      expect(accepted.status).toBe(201);
    });
  });
}
