// A lease renewal that never answers (a statement stuck on a connection whose socket died:
// postgres.js can leave one pending) must not stop the renewals after it. Before, the
// renewer's loop awaited it forever: every later call of that worker was aborted by the
// lease watchdog once TTL − margin passed, and each job was called again and again.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { sql } from "../../src/store/sql.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

/** The real database, except that the first lease renewal is sent and its answer never comes. */
function firstRenewalHangs(db: Db): { db: Db; hung: () => boolean } {
  let hung = false;
  const renew = sql("RenewLeases");
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== "query") return Reflect.get(target, prop, receiver);
      return (text: string, params?: unknown[]) => {
        if (text === renew && !hung) {
          hung = true;
          void target.query(text, params);
          return new Promise(() => {});
        }
        return target.query(text, params);
      };
    },
  });
  return { db: wrapped, hung: () => hung };
}

for (const driver of DRIVERS) {
  describe(`a lease renewal that never answers (${driver})`, () => {
    let t: TestDb;
    const target = new Target(async () => {
      await Bun.sleep(5_000);
      return new Response("ok");
    });
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(async () => {
      await t?.close();
      target.stop();
    });

    test("the next renewals still run: a 5 s call under a 3 s lease is called once and succeeds", async () => {
      const { db, hung } = firstRenewalHangs(t.db);
      const rt: Runtime = await startScheduler(db, { SCHEDULER_LEASE_TTL: "3s", SCHEDULER_CLOCK_SKEW: "500ms" });
      try {
        const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/long` }, timeout: "10s", retry: { max_attempts: 3, base: "100ms" } });
        expect(r.status).toBe(201);
        await eventually(
          async () => {
            const [row] = await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [r.body.id]);
            return row!.status === "succeeded" || row!.status === "dead";
          },
          15_000,
          "the job to finish",
        );
        expect(hung()).toBe(true);
        const [row] = await t.db.query<{ status: string; calls: number }>("SELECT status, calls FROM jobs WHERE id = $1", [r.body.id]);
        expect([row!.status, row!.calls]).toEqual(["succeeded", 1]);
        expect(target.callsTo("/long")).toHaveLength(1);
      } finally {
        await rt.stop();
      }
    });
  });
}
