import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { loadConfig } from "../../src/config.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";
import { expectError, HOOK } from "../api/support.ts";

// host_limits through the API: validated (400 naming the field), stored with the job or the
// schedule, shown in their views, inherited by a schedule's occurrences.

const BAD: [string, unknown, string][] = [
  ["rate 0", { rate: 0 }, "host_limits.rate"],
  ["negative rate", { rate: -1 }, "host_limits.rate"],
  ["rate as a string", { rate: "5" }, "host_limits.rate"],
  ["rate too high", { rate: 1e9 }, "host_limits.rate"],
  ["concurrency 0", { concurrency: 0 }, "host_limits.concurrency"],
  ["fractional concurrency", { concurrency: 1.5 }, "host_limits.concurrency"],
  ["concurrency too high", { concurrency: 100_000 }, "host_limits.concurrency"],
  ["unknown field", { rate: 1, burst: 5 }, "host_limits.burst"],
  ["empty object", {}, "host_limits"],
  ["not an object", 5, "host_limits"],
  ["an array", [1], "host_limits"],
];

for (const driver of DRIVERS) {
  describe(`host_limits in the API (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, {}, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
    });

    for (const [name, value, path] of BAD) {
      test(`POST /v1/jobs refuses host_limits: ${name} → 400 at ${path}`, async () => {
        const r = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, delay: "1h", host_limits: value });
        expectError(r, 400, path);
      });
    }

    test("a batch names the item: jobs.1.host_limits.rate", async () => {
      const r = await api(rt, "POST", "/v1/jobs/batch", {
        jobs: [
          { target: { url: HOOK }, delay: "1h", host_limits: { rate: 2 } },
          { target: { url: HOOK }, delay: "1h", host_limits: { rate: 0 } },
        ],
      });
      expect(r.status).toBe(200);
      expect(r.body.jobs[0].host_limits).toEqual({ rate: 2, concurrency: null });
      expect(r.body.jobs[1].error.path).toBe("jobs.1.host_limits.rate");
    });

    test("a job stores and shows its host_limits; none is null", async () => {
      const a = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, delay: "1h", host_limits: { rate: 0.5, concurrency: 3 } });
      expect(a.status).toBe(201);
      expect(a.body.host_limits).toEqual({ rate: 0.5, concurrency: 3 });
      expect((await api(rt, "GET", `/v1/jobs/${a.body.id}`)).body.host_limits).toEqual({ rate: 0.5, concurrency: 3 });
      const row = (await t.db.query<{ host_limits: unknown }>("SELECT host_limits FROM jobs WHERE id = $1", [a.body.id]))[0]!;
      expect(row.host_limits).toEqual({ rate: 0.5, concurrency: 3 });
      const b = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, delay: "1h" });
      expect(b.body.host_limits).toBeNull();
      const c = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, delay: "1h", host_limits: null });
      expect(c.body.host_limits).toBeNull();
    });

    test("the same idempotency key with other host_limits is another request: 409", async () => {
      const body = { target: { url: HOOK }, delay: "1h", idempotency_key: `hl-${driver}`, host_limits: { rate: 1 } };
      expect((await api(rt, "POST", "/v1/jobs", body)).status).toBe(201);
      expect((await api(rt, "POST", "/v1/jobs", body)).status).toBe(200);
      expectError(await api(rt, "POST", "/v1/jobs", { ...body, host_limits: { rate: 2 } }), 409);
    });

    test("schedules: host_limits on create and PATCH (null clears it), 400 with the path, and every occurrence carries it", async () => {
      expectError(
        await api(rt, "POST", "/v1/schedules", { cron: "0 9 * * *", target: { url: HOOK }, host_limits: { concurrency: -1 } }),
        400,
        "host_limits.concurrency",
      );
      const s = await api(rt, "POST", "/v1/schedules", { id: `hl-${driver}`, cron: "0 9 * * *", target: { url: HOOK }, host_limits: { rate: 3 } });
      expect(s.status).toBe(201);
      expect(s.body.host_limits).toEqual({ rate: 3, concurrency: null });
      const trig = await api(rt, "POST", `/v1/schedules/hl-${driver}/trigger`, {});
      expect(trig.status).toBe(201);
      expect(trig.body.host_limits).toEqual({ rate: 3, concurrency: null });

      expectError(await api(rt, "PATCH", `/v1/schedules/hl-${driver}`, { host_limits: { rate: "fast" } }), 400, "host_limits.rate");
      const p = await api(rt, "PATCH", `/v1/schedules/hl-${driver}`, { host_limits: { concurrency: 2 } });
      expect(p.status).toBe(200);
      expect(p.body.host_limits).toEqual({ rate: null, concurrency: 2 });
      // Other changes keep it; pause and resume keep it.
      expect((await api(rt, "PATCH", `/v1/schedules/hl-${driver}`, { priority: 5 })).body.host_limits).toEqual({ rate: null, concurrency: 2 });
      expect((await api(rt, "POST", `/v1/schedules/hl-${driver}/pause`, {})).body.host_limits).toEqual({ rate: null, concurrency: 2 });
      expect((await api(rt, "POST", `/v1/schedules/hl-${driver}/resume`, {})).body.host_limits).toEqual({ rate: null, concurrency: 2 });
      expect((await api(rt, "PATCH", `/v1/schedules/hl-${driver}`, { host_limits: null })).body.host_limits).toBeNull();
    });
  });

  describe(`occurrences inherit their schedule's host_limits (${driver})`, () => {
    test("the dispatcher's occurrence jobs carry the schedule's host_limits", async () => {
      const t = await freshDb(driver);
      const rt = await startScheduler(t.db, {}, { mode: "dispatcher" });
      const apiRt = await startScheduler(t.db, {}, { mode: "api" });
      try {
        const s = await api(apiRt, "POST", "/v1/schedules", {
          id: "every-second",
          cron: "* * * * * *",
          target: { url: HOOK },
          host_limits: { rate: 4, concurrency: 1 },
        });
        expect(s.status).toBe(201);
        const occ = await eventually(
          async () => {
            const r = await api(apiRt, "GET", "/v1/jobs?schedule_id=every-second");
            return r.body.items[0];
          },
          5000,
          "an occurrence",
        );
        expect(occ.host_limits).toEqual({ rate: 4, concurrency: 1 });
      } finally {
        await apiRt.stop();
        await rt.stop();
        await t.close();
      }
    });
  });
}

describe("host limit settings", () => {
  test("SCHEDULER_HOST_RATE, SCHEDULER_HOST_CONCURRENCY, SCHEDULER_HOST_RATE_FLOOR: defaults, values, one-line errors naming the variable", () => {
    expect(loadConfig({}).hostLimits).toEqual({ ratePerSec: undefined, concurrency: undefined, floorPerSec: 0.5 });
    expect(loadConfig({ SCHEDULER_HOST_RATE: "2.5", SCHEDULER_HOST_CONCURRENCY: "4", SCHEDULER_HOST_RATE_FLOOR: "1" }).hostLimits).toEqual({
      ratePerSec: 2.5,
      concurrency: 4,
      floorPerSec: 1,
    });
    for (const [k, v] of [
      ["SCHEDULER_HOST_RATE", "0"],
      ["SCHEDULER_HOST_RATE", "fast"],
      ["SCHEDULER_HOST_RATE", "-1"],
      ["SCHEDULER_HOST_CONCURRENCY", "0"],
      ["SCHEDULER_HOST_CONCURRENCY", "1.5"],
      ["SCHEDULER_HOST_RATE_FLOOR", "x"],
    ] as const) {
      let msg = "";
      try {
        loadConfig({ [k]: v });
      } catch (err) {
        msg = (err as Error).message;
      }
      expect(msg.startsWith(`${k} `)).toBe(true);
      expect(msg).not.toContain("\n");
    }
  });
});
