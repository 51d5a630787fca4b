import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tokenSpec } from "../helpers/tokens.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import {
  allSchedulePages,
  bearer,
  checkPreviewItem,
  createSchedule,
  dailyInstants,
  expectError,
  HOOK,
  LOCAL_ISO,
  ms,
  mustSchedule,
  offsetAt,
  UTC_ISO,
} from "./support.ts";

const TOKENS = tokenSpec("tokA:acme:jobs:read,jobs:write;tokB:beta:jobs:read,jobs:write;tokAll:*:admin");
const A = bearer("tokA");
const B = bearer("tokB");
const ALL = bearer("tokAll");
const NY = "America/New_York";
const MON_FRI = [1, 2, 3, 4, 5];
const EVERY_DAY = [1, 2, 3, 4, 5, 6, 7];

for (const driver of DRIVERS) {
  describe(`schedules API (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    let guarded: Runtime;
    let tokened: Runtime;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      // No dispatcher: nothing is generated behind the tests' backs.
      rt = await startScheduler(tdb.db, {}, { mode: "api" });
      guarded = await startScheduler(tdb.db, { SCHEDULER_ALLOW_PRIVATE_TARGETS: "0" }, { mode: "api" });
      tokened = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS }, { mode: "api" });
    });
    afterAll(async () => {
      await Promise.all([rt?.stop(), guarded?.stop(), tokened?.stop()]);
      await tdb?.close();
    });

    const scheduleCount = async () => Number((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM schedules"))[0].n);
    const get = (id: string, q = "", h: Record<string, string> = {}) => api(rt, "GET", `/v1/schedules/${encodeURIComponent(id)}${q}`, undefined, h);

    describe("create", () => {
      test("201 with the schedule object; next_fire_at is the first instant after now (checked with Temporal)", async () => {
        const before = Date.now();
        const r = await createSchedule(rt, {
          id: "daily-report",
          cron: "0 9 * * 1-5",
          timezone: NY,
          target: { url: HOOK, method: "put", headers: { "x-a": "b" }, body: { hello: "world" } },
        });
        const after = Date.now();
        expect(r.status).toBe(201);
        const s = r.body;
        expect(s).toMatchObject({
          id: "daily-report",
          tenant: "default",
          cron: "0 9 * * 1-5",
          timezone: NY,
          dst: { gap: "shift", fold: "first" },
          target: { url: HOOK, method: "PUT", headers: { "x-a": "b" }, body: { hello: "world" } },
          misfire: "fire_once",
          overlap: "skip",
          max_queued: 1,
          paused: false,
          paused_reason: null,
          misfire_grace: null,
          start_at: null,
          end_at: null,
          version: 1,
          occurrences: { generated: 0, skipped: 0, misfired: 0 },
        });
        expect(s.next_fire_at).toMatch(UTC_ISO);
        const next = ms(s.next_fire_at);
        // Independently: the first weekday 09:00 in New York after the request.
        const [lo] = dailyInstants(NY, 9, 0, MON_FRI, before, 1);
        const [hi] = dailyInstants(NY, 9, 0, MON_FRI, after, 1);
        expect([lo, hi]).toContain(next);
        expect(s.next_fire_local).toMatch(LOCAL_ISO);
        expect(ms(s.next_fire_local)).toBe(next);
        expect(s.next_fire_local.slice(-6)).toBe(offsetAt(NY, next));
        expect(s.next_fire_local.slice(11, 19)).toBe("09:00:00");
        // And it is what GET shows.
        const g = await get("daily-report");
        expect(g.status).toBe(200);
        expect(g.body).toMatchObject({ id: "daily-report", version: 1, next_fire_at: s.next_fire_at, dst: { gap: "shift", fold: "first" } });
        expect(g.body.preview).toBeUndefined();
      });

      test("a generated id is sch_…; timezone defaults to UTC", async () => {
        const before = Date.now();
        const a = await mustSchedule(rt, { cron: "0 12 * * *" });
        const after = Date.now();
        const b = await mustSchedule(rt, { cron: "0 12 * * *" });
        expect(a.id).toMatch(/^sch_[A-Za-z0-9_.:-]+$/);
        expect(b.id).toMatch(/^sch_/);
        expect(a.id).not.toBe(b.id);
        expect(a.timezone).toBe("UTC");
        expect(a.version).toBe(1);
        expect([dailyInstants("UTC", 12, 0, EVERY_DAY, before, 1)[0], dailyInstants("UTC", 12, 0, EVERY_DAY, after, 1)[0]]).toContain(ms(a.next_fire_at));
        expect(a.next_fire_local).toMatch(/T12:00:00\+00:00$/);
        expect((await get(a.id)).status).toBe(200);
      });

      test("effective dst: fixed hour → shift/first, interval hour → skip/both, overrides echoed", async () => {
        const cases: [string, Record<string, string> | undefined, { gap: string; fold: string }][] = [
          ["0 9 * * 1-5", undefined, { gap: "shift", fold: "first" }],
          ["0 9,17 * * *", undefined, { gap: "shift", fold: "first" }],
          ["0 30 2 * * *", undefined, { gap: "shift", fold: "first" }],
          ["*/15 * * * *", undefined, { gap: "skip", fold: "both" }],
          ["0 */2 * * *", undefined, { gap: "skip", fold: "both" }],
          ["0 9-17 * * *", undefined, { gap: "skip", fold: "both" }],
          ["0 9 * * 1-5", { gap: "skip", fold: "last" }, { gap: "skip", fold: "last" }],
          ["0 9 * * 1-5", { fold: "both" }, { gap: "shift", fold: "both" }],
          ["*/15 * * * *", { gap: "shift", fold: "first" }, { gap: "shift", fold: "first" }],
          ["*/15 * * * *", { fold: "last" }, { gap: "skip", fold: "last" }],
        ];
        for (const [cron, dst, want] of cases) {
          const s = await mustSchedule(rt, { cron, timezone: NY, ...(dst ? { dst } : {}) });
          try {
            expect(s.dst).toEqual(want);
            expect((await get(s.id)).body.dst).toEqual(want);
          } catch (e) {
            throw new Error(`${cron} dst=${JSON.stringify(dst)}: ${(e as Error).message}`);
          }
        }
      });

      test("the same id again in the tenant → 409, the first one unchanged", async () => {
        const first = await mustSchedule(rt, { id: "dup-1", cron: "0 1 * * *" });
        const n = await scheduleCount();
        const again = await createSchedule(rt, { id: "dup-1", cron: "0 2 * * *" });
        expectError(again, 409);
        expect(await scheduleCount()).toBe(n);
        expect((await get("dup-1")).body).toMatchObject({ cron: "0 1 * * *", version: 1, next_fire_at: first.next_fire_at });
        // Unique per tenant, not globally.
        const other = await createSchedule(rt, { id: "dup-1", tenant: "elsewhere" });
        expect(other.status).toBe(201);
        expect(other.body.tenant).toBe("elsewhere");
      });

      test("start_at in the future: next_fire_at is the first occurrence at or after it", async () => {
        // 2030-01-05 is a Saturday: the first weekday 09:00 in New York after it is Monday 2030-01-07.
        const sat = "2030-01-05T00:00:00Z";
        const s = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY, start_at: sat });
        expect(ms(s.start_at)).toBe(ms(sat));
        const [expected] = dailyInstants(NY, 9, 0, MON_FRI, ms(sat), 1, false);
        expect(ms(s.next_fire_at)).toBe(expected);
        expect(ms(s.next_fire_at)).toBe(ms("2030-01-07T14:00:00Z"));
        // start_at exactly on an occurrence: that occurrence is the first (at, not after).
        const on = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY, start_at: "2030-01-07T14:00:00Z" });
        expect(ms(on.next_fire_at)).toBe(ms("2030-01-07T14:00:00Z"));
        // In summer the offset is -04:00.
        const summer = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY, start_at: "2030-07-01T00:00:00Z" });
        expect(ms(summer.next_fire_at)).toBe(ms("2030-07-01T13:00:00Z"));
        expect(summer.next_fire_local).toBe("2030-07-01T09:00:00-04:00");
      });

      test("end_at before start_at → 400 path end_at; nothing stored", async () => {
        const n = await scheduleCount();
        expectError(await createSchedule(rt, { start_at: "2030-01-02T00:00:00Z", end_at: "2030-01-01T00:00:00Z" }), 400, "end_at");
        expectError(await createSchedule(rt, { start_at: "2030-01-02T00:00:00Z", end_at: "2030-01-02T00:00:00Z" }), 400, "end_at");
        expect(await scheduleCount()).toBe(n);
      });

      test("a bad cron → 400 path cron", async () => {
        const n = await scheduleCount();
        for (const cron of ["61 * * * *", "* * *", "* * * * * * *", "0 25 * * *", "not a cron", "", "* * * * 8-9x"]) {
          const r = await createSchedule(rt, { cron });
          try {
            expectError(r, 400, "cron");
          } catch (e) {
            throw new Error(`cron ${JSON.stringify(cron)}: ${(e as Error).message}`);
          }
        }
        expectError(await createSchedule(rt, { cron: 5 }), 400, "cron");
        expect(await scheduleCount()).toBe(n);
      });

      test("an unknown zone → 400 path timezone", async () => {
        const n = await scheduleCount();
        for (const timezone of ["Mars/Base", "America/Nowhere", "", "EST+5x"]) {
          const r = await createSchedule(rt, { cron: "0 9 * * *", timezone });
          try {
            expectError(r, 400, "timezone");
          } catch (e) {
            throw new Error(`timezone ${JSON.stringify(timezone)}: ${(e as Error).message}`);
          }
        }
        expect(await scheduleCount()).toBe(n);
      });

      test("bad misfire / overlap / max_queued / window / dst / durations → 400 naming the field", async () => {
        const n = await scheduleCount();
        const cases: [Record<string, unknown>, string][] = [
          [{ misfire: "sometimes" }, "misfire"],
          [{ misfire: 1 }, "misfire"],
          [{ overlap: "never" }, "overlap"],
          [{ max_queued: 0 }, "max_queued"],
          [{ max_queued: 1.5 }, "max_queued"],
          [{ max_queued: "2" }, "max_queued"],
          [{ window: "soon" }, "window"],
          [{ window: "-1s" }, "window"],
          [{ window: "2d" }, "window"],
          [{ dst: { gap: "forward" } }, "dst.gap"],
          [{ dst: { fold: "middle" } }, "dst.fold"],
          [{ dst: { gap: "shift", wobble: true } }, "dst.wobble"],
          [{ dst: "shift" }, "dst"],
          [{ misfire_grace: "later" }, "misfire_grace"],
          [{ catchup_window: "forever" }, "catchup_window"],
          [{ paused: "yes" }, "paused"],
          [{ start_at: "tomorrow" }, "start_at"],
          [{ end_at: "2030-13-45" }, "end_at"],
          [{ id: "has space" }, "id"],
          [{ id: "a@b" }, "id"],
          [{ target: { url: "ftp://example.com/x" } }, "target.url"],
        ];
        for (const [extra, path] of cases) {
          const r = await createSchedule(rt, extra);
          try {
            expectError(r, 400, path);
          } catch (e) {
            throw new Error(`${JSON.stringify(extra)}: ${(e as Error).message}`);
          }
        }
        expect(await scheduleCount()).toBe(n);
      });

      test("an unknown field or a missing cron/target → 400", async () => {
        const n = await scheduleCount();
        expectError(await createSchedule(rt, { colour: "blue" }), 400, "colour");
        expectError(await createSchedule(rt, { delay: "1s" }), 400, "delay");
        expectError(await api(rt, "POST", "/v1/schedules", { target: { url: HOOK } }), 400, "cron");
        expectError(await api(rt, "POST", "/v1/schedules", { cron: "0 9 * * *" }), 400, "target");
        expectError(await api(rt, "POST", "/v1/schedules", "{not json"), 400);
        expectError(await api(rt, "POST", "/v1/schedules", [1, 2]), 400);
        expect(await scheduleCount()).toBe(n);
      });

      test("a private target with SCHEDULER_ALLOW_PRIVATE_TARGETS=0 → 400 target_refused path target.url", async () => {
        const n = await scheduleCount();
        for (const url of ["http://127.0.0.1:8080/x", "http://10.0.0.5/hook", "http://169.254.169.254/latest/meta-data", "http://localhost:9/x"]) {
          const r = await api(guarded, "POST", "/v1/schedules", { cron: "0 9 * * *", target: { url } });
          try {
            expect(expectError(r, 400, "target.url").code).toBe("target_refused");
          } catch (e) {
            throw new Error(`${url}: ${(e as Error).message}`);
          }
        }
        expect(await scheduleCount()).toBe(n);
        // Nor can a PATCH point an existing schedule there.
        const s = await mustSchedule(rt, { cron: "0 9 * * *" });
        const p = await api(guarded, "PATCH", `/v1/schedules/${s.id}`, { target: { url: "http://127.0.0.1:8080/x" } });
        expect(expectError(p, 400, "target.url").code).toBe("target_refused");
        expect((await get(s.id)).body).toMatchObject({ version: 1, target: { url: HOOK } });
      });
    });

    describe("preview", () => {
      test("N instants in order, each {at, local} with the zone's offset; equal to Temporal's own count", async () => {
        const s = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY, start_at: "2030-01-01T00:00:00Z" });
        const r = await get(s.id, "?preview=30");
        expect(r.status).toBe(200);
        expect(r.body.id).toBe(s.id);
        const p = r.body.preview as { at: string; local: string }[];
        expect(p.length).toBe(30);
        for (const item of p) checkPreviewItem(item, NY);
        const ats = p.map((x) => ms(x.at));
        for (let i = 1; i < ats.length; i++) expect(ats[i]).toBeGreaterThan(ats[i - 1]);
        expect(ats).toEqual(dailyInstants(NY, 9, 0, MON_FRI, ms("2030-01-01T00:00:00Z"), 30, false));
        for (const item of p) expect(item.local.slice(11, 19)).toBe("09:00:00");
        // Across the March 2030 DST start (March 10): offsets change from -05:00 to -04:00.
        const spring = await get((await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY, start_at: "2030-03-07T00:00:00Z" })).id, "?preview=4");
        expect(spring.body.preview.map((x: any) => x.local)).toEqual([
          "2030-03-07T09:00:00-05:00",
          "2030-03-08T09:00:00-05:00",
          "2030-03-11T09:00:00-04:00",
          "2030-03-12T09:00:00-04:00",
        ]);
        expect(spring.body.preview.map((x: any) => ms(x.at))).toEqual([
          ms("2030-03-07T14:00:00Z"),
          ms("2030-03-08T14:00:00Z"),
          ms("2030-03-11T13:00:00Z"),
          ms("2030-03-12T13:00:00Z"),
        ]);
      });

      test("DST gap pinned: 30 2 * * * in New York around 2027-03-14", async () => {
        const s = await mustSchedule(rt, { cron: "30 2 * * *", timezone: NY, start_at: "2027-03-13T00:00:00Z" });
        expect(s.dst).toEqual({ gap: "shift", fold: "first" });
        expect(ms(s.next_fire_at)).toBe(ms("2027-03-13T07:30:00Z"));
        expect(s.next_fire_local).toBe("2027-03-13T02:30:00-05:00");
        const r = await get(s.id, "?preview=3");
        expect(r.status).toBe(200);
        const p = r.body.preview as { at: string; local: string }[];
        for (const item of p) checkPreviewItem(item, NY);
        expect(p.map((x) => ms(x.at))).toEqual([ms("2027-03-13T07:30:00Z"), ms("2027-03-14T07:30:00Z"), ms("2027-03-15T06:30:00Z")]);
        expect(p.map((x) => x.local)).toEqual(["2027-03-13T02:30:00-05:00", "2027-03-14T03:30:00-04:00", "2027-03-15T02:30:00-04:00"]);
        // Temporal agrees (compatible disambiguation = shift/first).
        expect(p.map((x) => ms(x.at))).toEqual(dailyInstants(NY, 2, 30, EVERY_DAY, ms("2027-03-13T00:00:00Z"), 3, false));
      });

      test("dst.gap skip: 30 2 * * * in New York has no run on 2027-03-14 and goes on the day after", async () => {
        const skip = await mustSchedule(rt, { cron: "30 2 * * *", timezone: NY, start_at: "2027-03-13T00:00:00Z", dst: { gap: "skip" } });
        const sp = (await get(skip.id, "?preview=3")).body.preview as { at: string; local: string }[];
        expect(sp.map((x) => ms(x.at))).toEqual([ms("2027-03-13T07:30:00Z"), ms("2027-03-15T06:30:00Z"), ms("2027-03-16T06:30:00Z")]);
      });

      test("DST fold: an hourly rule runs on both 01:30s of 2027-11-07 in New York; a fixed-hour rule on the first", async () => {
        const hourly = await mustSchedule(rt, { cron: "30 * * * *", timezone: NY, start_at: "2027-11-07T04:00:00Z" });
        const hp = (await get(hourly.id, "?preview=4")).body.preview as { at: string; local: string }[];
        for (const item of hp) checkPreviewItem(item, NY);
        expect(hp.map((x) => x.local)).toEqual([
          "2027-11-07T00:30:00-04:00",
          "2027-11-07T01:30:00-04:00",
          "2027-11-07T01:30:00-05:00",
          "2027-11-07T02:30:00-05:00",
        ]);
        expect(hp.map((x) => ms(x.at))).toEqual([
          ms("2027-11-07T04:30:00Z"),
          ms("2027-11-07T05:30:00Z"),
          ms("2027-11-07T06:30:00Z"),
          ms("2027-11-07T07:30:00Z"),
        ]);
        const fixed = await mustSchedule(rt, { cron: "30 1 * * *", timezone: NY, start_at: "2027-11-06T00:00:00Z" });
        const fp = (await get(fixed.id, "?preview=3")).body.preview as { at: string; local: string }[];
        expect(fp.map((x) => x.local)).toEqual(["2027-11-06T01:30:00-04:00", "2027-11-07T01:30:00-04:00", "2027-11-08T01:30:00-05:00"]);
      });

      test("preview respects end_at; bad preview values → 400; unknown id → 404", async () => {
        const s = await mustSchedule(rt, { cron: "0 0 * * *", start_at: "2030-01-01T00:00:00Z", end_at: "2030-01-04T12:00:00Z" });
        const r = await get(s.id, "?preview=10");
        expect(r.status).toBe(200);
        expect(r.body.preview.map((x: any) => ms(x.at))).toEqual([
          ms("2030-01-01T00:00:00Z"),
          ms("2030-01-02T00:00:00Z"),
          ms("2030-01-03T00:00:00Z"),
          ms("2030-01-04T00:00:00Z"),
        ]);
        expect((await get(s.id, "?preview=1000")).body.preview.length).toBe(4);
        // Many, unbounded: exactly 1000, all in order.
        const big = await get((await mustSchedule(rt, { cron: "*/5 * * * *" })).id, "?preview=1000");
        expect(big.status).toBe(200);
        expect(big.body.preview.length).toBe(1000);
        const bigAts = big.body.preview.map((x: any) => ms(x.at));
        for (let i = 1; i < bigAts.length; i++) expect(bigAts[i] - bigAts[i - 1]).toBe(300_000);
        expect(bigAts[0]).toBeGreaterThan(Date.now() - 5000);
        for (const bad of ["1001", "-1", "abc", "2.5", "1e3"]) {
          try {
            expectError(await get(s.id, `?preview=${bad}`), 400, "preview");
          } catch (e) {
            throw new Error(`preview=${bad}: ${(e as Error).message}`);
          }
        }
        expectError(await get("no-such-schedule"), 404);
        expectError(await get("no-such-schedule", "?preview=3"), 404);
        expectError(await get("bad id with spaces"), 404);
        // Another tenant's id is not found in the default tenant.
        await mustSchedule(rt, { id: "only-in-t2", tenant: "t2" });
        expectError(await get("only-in-t2"), 404);
        expect((await get("only-in-t2", "?tenant=t2")).status).toBe(200);
      });
    });

    describe("list", () => {
      test("pagination: limit/cursor, every schedule once, next_cursor null at the end", async () => {
        const ids: string[] = [];
        for (let i = 0; i < 7; i++) ids.push((await mustSchedule(rt, { id: `pg-${i}`, tenant: "paging", cron: `${i} 3 * * *` })).id);
        for (const limit of [1, 2, 3, 7, 100]) {
          const pages = await allSchedulePages(rt, "tenant=paging", limit);
          const seen = pages.flat().map((s) => s.id);
          expect(new Set(seen).size).toBe(seen.length);
          expect([...seen].sort()).toEqual([...ids].sort());
          expect(pages.length).toBe(Math.ceil(7 / limit));
          for (const s of pages.flat()) expect(s).toMatchObject({ tenant: "paging", version: 1 });
        }
        // The whole object, as GET gives it.
        const [first] = (await allSchedulePages(rt, "tenant=paging", 1))[0];
        expect(first).toEqual((await get(first.id, "?tenant=paging")).body);
        // Without a tenant an all-tenant caller sees every tenant.
        const everything = (await allSchedulePages(rt, "x=1", 50)).flat();
        expect(everything.filter((s) => s.tenant === "paging").length).toBe(7);
        expect(everything.some((s) => s.tenant === "default")).toBe(true);
        expect(new Set(everything.map((s) => `${s.tenant}/${s.id}`)).size).toBe(everything.length);
        expectError(await api(rt, "GET", "/v1/schedules?cursor=garbage!!"), 400, "cursor");
        expectError(await api(rt, "GET", "/v1/schedules?limit=0"), 400, "limit");
        expectError(await api(rt, "GET", "/v1/schedules?limit=1001"), 400, "limit");
      });

      test("tenant isolation: another tenant's schedule is 404 everywhere and not listed", async () => {
        const a = await mustSchedule(tokened, { id: "iso", cron: "0 9 * * *" }, A);
        expect(a.tenant).toBe("acme");
        const b = await mustSchedule(tokened, { id: "iso-b", cron: "0 9 * * *" }, B);
        expect(b.tenant).toBe("beta");
        expectError(await createSchedule(tokened, { tenant: "beta" }, A), 403);
        const tries: [string, string, unknown?][] = [
          ["GET", "/v1/schedules/iso"],
          ["GET", "/v1/schedules/iso?preview=3"],
          ["GET", "/v1/schedules/iso?tenant=acme"],
          ["PATCH", "/v1/schedules/iso", { cron: "0 10 * * *" }],
          ["POST", "/v1/schedules/iso/pause", {}],
          ["POST", "/v1/schedules/iso/resume", {}],
          ["POST", "/v1/schedules/iso/trigger", {}],
          ["DELETE", "/v1/schedules/iso"],
        ];
        for (const [method, path, body] of tries) {
          const r = await api(tokened, method, path, body, B);
          try {
            expectError(r, 404);
            expect(JSON.stringify(r.body)).not.toContain("acme");
          } catch (e) {
            throw new Error(`${method} ${path} as beta: ${(e as Error).message}`);
          }
        }
        const seenByB = (await allSchedulePages(tokened, "tenant=acme", 100, B)).flat().map((s) => s.id);
        expect(seenByB).toContain("iso-b");
        expect(seenByB).not.toContain("iso");
        const seenByA = (await allSchedulePages(tokened, "x=1", 100, A)).flat();
        expect(seenByA.map((s) => s.id)).toEqual(["iso"]);
        // Untouched, and no job was triggered for it.
        expect((await api(tokened, "GET", "/v1/schedules/iso", undefined, A)).body).toMatchObject({ version: 1, cron: "0 9 * * *", paused: false });
        expect((await api(tokened, "GET", "/v1/jobs?schedule_id=iso", undefined, ALL)).body.items).toEqual([]);
        // The same id in the other tenant is a different schedule.
        const b2 = await mustSchedule(tokened, { id: "iso", cron: "0 11 * * *" }, B);
        expect(b2.tenant).toBe("beta");
        expect((await api(tokened, "GET", "/v1/schedules/iso", undefined, A)).body.cron).toBe("0 9 * * *");
        expect((await api(tokened, "GET", "/v1/schedules/iso", undefined, B)).body.cron).toBe("0 11 * * *");
        // All-tenant token reaches acme's with ?tenant.
        expect((await api(tokened, "GET", "/v1/schedules/iso?tenant=acme", undefined, ALL)).body.tenant).toBe("acme");
      });
    });

    describe("patch, pause, resume, delete, trigger", () => {
      test("PATCH with if_version: 200 and version+1; stale → 409; a new cron recomputes next_fire_at", async () => {
        const s = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY });
        const p1 = await api(rt, "PATCH", `/v1/schedules/${s.id}`, { if_version: 1, priority: 5, overlap: "queue", max_queued: 3 });
        expect(p1.status).toBe(200);
        expect(p1.body).toMatchObject({
          id: s.id,
          version: 2,
          priority: 5,
          overlap: "queue",
          max_queued: 3,
          cron: "0 9 * * 1-5",
          next_fire_at: s.next_fire_at,
        });
        const stale = await api(rt, "PATCH", `/v1/schedules/${s.id}`, { if_version: 1, priority: 7 });
        expectError(stale, 409);
        expect((await get(s.id)).body).toMatchObject({ version: 2, priority: 5 });
        // A new rule: Sundays at 06:15 in Tokyo.
        const before = Date.now();
        const p2 = await api(rt, "PATCH", `/v1/schedules/${s.id}`, { if_version: 2, cron: "15 6 * * 0", timezone: "Asia/Tokyo" });
        const after = Date.now();
        expect(p2.status).toBe(200);
        expect(p2.body).toMatchObject({ version: 3, cron: "15 6 * * 0", timezone: "Asia/Tokyo", dst: { gap: "shift", fold: "first" } });
        const [lo] = dailyInstants("Asia/Tokyo", 6, 15, [7], before, 1);
        const [hi] = dailyInstants("Asia/Tokyo", 6, 15, [7], after, 1);
        expect([lo, hi]).toContain(ms(p2.body.next_fire_at));
        expect(p2.body.next_fire_local).toMatch(/T06:15:00\+09:00$/);
        // Without if_version: unconditional.
        const p3 = await api(rt, "PATCH", `/v1/schedules/${s.id}`, { start_at: "2031-01-01T00:00:00Z" });
        expect(p3.status).toBe(200);
        expect(p3.body.version).toBe(4);
        expect(ms(p3.body.next_fire_at)).toBe(dailyInstants("Asia/Tokyo", 6, 15, [7], ms("2031-01-01T00:00:00Z"), 1, false)[0]);
        expectError(await api(rt, "PATCH", "/v1/schedules/nope", { priority: 1 }), 404);
      });

      test("PATCH with a bad cron, zone, end_at or unknown field → 400 and the schedule unchanged", async () => {
        const s = await mustSchedule(rt, { cron: "0 9 * * 1-5", timezone: NY });
        const cases: [Record<string, unknown>, string][] = [
          [{ cron: "61 * * * *" }, "cron"],
          [{ cron: "* * *" }, "cron"],
          [{ if_version: 1, cron: "* * * * * * *" }, "cron"],
          [{ timezone: "Mars/Base" }, "timezone"],
          [{ end_at: "2020-01-01T00:00:00Z", start_at: "2021-01-01T00:00:00Z" }, "end_at"],
          [{ misfire: "never" }, "misfire"],
          [{ dst: { gap: "up" } }, "dst.gap"],
          [{ colour: "red" }, "colour"],
          [{ id: "renamed" }, "id"],
        ];
        for (const [body, path] of cases) {
          const r = await api(rt, "PATCH", `/v1/schedules/${s.id}`, body);
          try {
            expectError(r, 400, path);
          } catch (e) {
            throw new Error(`PATCH ${JSON.stringify(body)}: ${(e as Error).message}`);
          }
        }
        const g = (await get(s.id)).body;
        expect(g).toMatchObject({ version: 1, cron: "0 9 * * 1-5", timezone: NY, next_fire_at: s.next_fire_at, misfire: "fire_once", end_at: null });
        expect(g.updated_at).toBe(s.updated_at);
      });

      test("pause → paused with a reason; resume → not paused; versions count", async () => {
        const s = await mustSchedule(rt, { cron: "0 9 * * *" });
        const p = await api(rt, "POST", `/v1/schedules/${s.id}/pause`, { reason: "maintenance window" });
        expect(p.status).toBe(200);
        expect(p.body).toMatchObject({ id: s.id, paused: true, paused_reason: "maintenance window", version: 2 });
        expect((await get(s.id)).body).toMatchObject({ paused: true, paused_reason: "maintenance window" });
        const stale = await api(rt, "POST", `/v1/schedules/${s.id}/resume`, { if_version: 1 });
        expectError(stale, 409);
        const r = await api(rt, "POST", `/v1/schedules/${s.id}/resume`, { if_version: 2 });
        expect(r.status).toBe(200);
        expect(r.body).toMatchObject({ paused: false, paused_reason: null, version: 3, next_fire_at: s.next_fire_at });
        // Without a reason there is still one.
        const p2 = await api(rt, "POST", `/v1/schedules/${s.id}/pause`);
        expect(p2.status).toBe(200);
        expect(p2.body.paused).toBe(true);
        expect(typeof p2.body.paused_reason).toBe("string");
        expect(p2.body.paused_reason.length).toBeGreaterThan(0);
        // Created paused.
        const cp = await mustSchedule(rt, { cron: "0 9 * * *", paused: true });
        expect(cp.paused).toBe(true);
        expectError(await api(rt, "POST", "/v1/schedules/nope/pause", {}), 404);
        expectError(await api(rt, "POST", "/v1/schedules/nope/resume", {}), 404);
        expectError(await api(rt, "POST", `/v1/schedules/${s.id}/pause`, { color: 1 }), 400, "color");
      });

      test("trigger → 201 with a job of the schedule, nominal_time ≈ now, idempotency_key <id>@<nominal_time>", async () => {
        const s = await mustSchedule(rt, { id: "trig-me", cron: "0 0 1 1 *", priority: 3, retry: { max_attempts: 4 } });
        const before = Date.now();
        const r = await api(rt, "POST", `/v1/schedules/${s.id}/trigger`, {});
        const after = Date.now();
        expect(r.status).toBe(201);
        const j = r.body;
        expect(j).toMatchObject({
          tenant: "default",
          schedule_id: "trig-me",
          status: "scheduled",
          priority: 3,
          retry: { max_attempts: 4 },
          target: { url: HOOK },
        });
        expect(j.nominal_time).toMatch(UTC_ISO);
        const nominal = ms(j.nominal_time);
        expect(nominal).toBeGreaterThanOrEqual(before - 1000);
        expect(nominal).toBeLessThanOrEqual(after + 1000);
        expect(j.idempotency_key).toBe(`trig-me@${j.nominal_time}`);
        const g = await api(rt, "GET", `/v1/jobs/${j.id}`);
        expect(g.body).toMatchObject({ id: j.id, schedule_id: "trig-me", idempotency_key: `trig-me@${j.nominal_time}` });
        const listed = await api(rt, "GET", "/v1/jobs?schedule_id=trig-me");
        expect(listed.body.items.map((x: any) => x.id)).toEqual([j.id]);
        // The schedule itself does not move.
        expect((await get(s.id)).body).toMatchObject({ version: 1, next_fire_at: s.next_fire_at });
        expectError(await api(rt, "POST", "/v1/schedules/nope/trigger", {}), 404);
      });

      test("DELETE → {deleted: true}; then 404 everywhere, and its pending occurrence jobs are cancelled", async () => {
        const s = await mustSchedule(rt, { id: "doomed", cron: "0 0 1 1 *" });
        const j1 = (await api(rt, "POST", "/v1/schedules/doomed/trigger", {})).body;
        const j2 = (await api(rt, "POST", "/v1/schedules/doomed/trigger", {})).body;
        // An unrelated job is left alone.
        const other = (await api(rt, "POST", "/v1/jobs", { target: { url: HOOK } })).body;
        expect((await api(rt, "GET", `/v1/jobs/${j1.id}`)).body.status).toBe("scheduled");
        const d = await api(rt, "DELETE", `/v1/schedules/${s.id}`);
        expect(d.status).toBe(200);
        expect(d.body).toMatchObject({ id: "doomed", deleted: true });
        if ("cancelled_occurrences" in d.body) expect(d.body.cancelled_occurrences).toBe(2);
        expectError(await get("doomed"), 404);
        expectError(await get("doomed", "?preview=2"), 404);
        expectError(await api(rt, "DELETE", "/v1/schedules/doomed"), 404);
        expectError(await api(rt, "POST", "/v1/schedules/doomed/trigger", {}), 404);
        expectError(await api(rt, "PATCH", "/v1/schedules/doomed", { priority: 1 }), 404);
        expect((await allSchedulePages(rt, "tenant=default", 1000)).flat().map((x) => x.id)).not.toContain("doomed");
        for (const j of [j1, j2]) {
          const g = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
          expect(g.status).toBe("cancelled");
          expect(g.finished_at).not.toBeNull();
        }
        expect((await api(rt, "GET", `/v1/jobs/${other.id}`)).body.status).toBe("scheduled");
        // The id can be used again.
        expect((await createSchedule(rt, { id: "doomed" })).status).toBe(201);
      });
    });
  });
}
