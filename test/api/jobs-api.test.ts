import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";
import type { Runtime } from "../../src/runtime.ts";
import { insertJobs } from "../../src/store/jobs.ts";
import { createJob, expectError, HOOK, mustCreate, UUID_V7 } from "./support.ts";

const near = (iso: string, expected: number, slackMs = 1500) => {
  const t = Date.parse(iso);
  expect(Number.isNaN(t)).toBe(false);
  expect(Math.abs(t - expected)).toBeLessThanOrEqual(slackMs);
};

/** Every page of GET /v1/jobs for a query, checking the page shape as it goes. */
async function allPages(rt: Runtime, query: string, limit: number) {
  const pages: any[][] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const r = await api(rt, "GET", `/v1/jobs?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body.items)).toBe(true);
    pages.push(r.body.items);
    cursor = r.body.next_cursor;
    if (cursor === null) return pages;
    expect(typeof cursor).toBe("string");
  }
  throw new Error("pagination did not end");
}

for (const driver of DRIVERS) {
  describe(`jobs API (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;

    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, {}, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });

    const makeRunning = (id: string) => tdb.db.query("UPDATE jobs SET status='running', lease_owner='x', lease_until=now()+interval '1 min' WHERE id=$1", [id]);

    describe("create", () => {
      test("201 with the job object of the README (The HTTP API)", async () => {
        const before = Date.now();
        const r = await createJob(rt, {
          target: {
            url: HOOK,
            method: "put",
            headers: { "x-a": "b", "Content-Type": "application/json" },
            body: { any: "json", n: [1, 2.5, null], nested: { ok: true } },
          },
          delay: "30s",
        });
        const after = Date.now();
        expect(r.status).toBe(201);
        const j = r.body;
        expect(j.id).toMatch(UUID_V7);
        expect(j.id[14]).toBe("7");
        expect(j).toMatchObject({
          tenant: "default",
          status: "scheduled",
          version: 1,
          attempts: 0,
          idempotency_key: null,
          schedule_id: null,
          nominal_time: null,
          priority: 0,
          last_error: null,
          target: {
            url: HOOK,
            method: "PUT",
            headers: { "x-a": "b", "Content-Type": "application/json" },
            body: { any: "json", n: [1, 2.5, null], nested: { ok: true } },
          },
        });
        expect(j.target.body_text).toBeUndefined();
        const due = Date.parse(j.due_at);
        expect(due).toBeGreaterThanOrEqual(before + 30_000);
        expect(due).toBeLessThanOrEqual(after + 30_000);
        near(j.created_at, Date.now(), 5000);
        near(j.updated_at, Date.now(), 5000);
        for (const f of [
          "id",
          "tenant",
          "status",
          "due_at",
          "version",
          "attempts",
          "idempotency_key",
          "schedule_id",
          "nominal_time",
          "target",
          "priority",
          "created_at",
          "updated_at",
          "last_error",
        ]) {
          expect(j).toHaveProperty(f);
        }
      });

      test("body_text is kept byte-for-byte; method defaults to POST", async () => {
        const text = '  {"not": json,\r\n\ttrailing spaces   \u00e9\u4e2d\u{1F600} "quotes" \\ backslash\n';
        const j = await mustCreate(rt, { target: { url: HOOK, headers: { "content-type": "text/plain" }, body_text: text } });
        expect(j.target.body_text).toBe(text);
        expect(j.target.body).toBeUndefined();
        expect(j.target.method).toBe("POST");
        const g = await api(rt, "GET", `/v1/jobs/${j.id}`);
        expect(g.body.target.body_text).toBe(text);
        const [row] = await tdb.db.query<{ body: string }>("SELECT target->>'body' AS body FROM jobs WHERE id=$1", [j.id]);
        expect(row.body).toBe(text);
      });

      test("run_at is honoured exactly, offsets included", async () => {
        const a = await mustCreate(rt, { run_at: "2030-01-02T03:04:05.678Z" });
        expect(a.due_at).toBe("2030-01-02T03:04:05.678Z");
        const b = await mustCreate(rt, { run_at: "2030-01-02T05:04:05+02:00" });
        expect(b.due_at).toBe("2030-01-02T03:04:05.000Z");
      });

      test("neither run_at nor delay: due now", async () => {
        const before = Date.now();
        const j = await mustCreate(rt);
        const due = Date.parse(j.due_at);
        expect(due).toBeGreaterThanOrEqual(before - 5);
        expect(due).toBeLessThanOrEqual(Date.now() + 5);
      });

      test("window spreads later, never earlier than run_at", async () => {
        const runAt = Date.parse("2031-06-01T12:00:00Z");
        const dues = await Promise.all(
          Array.from({ length: 8 }, () => mustCreate(rt, { run_at: "2031-06-01T12:00:00Z", window: "1h" }).then((j) => Date.parse(j.due_at))),
        );
        for (const d of dues) {
          expect(d).toBeGreaterThanOrEqual(runAt);
          expect(d).toBeLessThanOrEqual(runAt + 3_600_000);
        }
        // A 1 h window over 8 jobs: they do not all land on run_at itself.
        expect(dues.some((d) => d > runAt)).toBe(true);
        const before = Date.now();
        const w = await mustCreate(rt, { delay: "10m", window: "5m" });
        expect(Date.parse(w.due_at)).toBeGreaterThanOrEqual(before + 600_000);
      });
    });

    describe("get", () => {
      test("GET /v1/jobs/:id returns the job with attempt_log []", async () => {
        const j = await mustCreate(rt, { idempotency_key: "get-1", priority: 7 });
        const r = await api(rt, "GET", `/v1/jobs/${j.id}`);
        expect(r.status).toBe(200);
        expect(r.body.attempt_log).toEqual([]);
        const { attempt_log: _, ...rest } = r.body;
        expect(rest).toEqual(j);
        expect(r.body).toMatchObject({ id: j.id, priority: 7, idempotency_key: "get-1" });
      });

      test("a batch's 201 items are the jobs GET returns (the row completed from the input and the database's defaults)", async () => {
        const r = await api(rt, "POST", "/v1/jobs/batch", {
          jobs: [
            { target: { url: `${HOOK}/b1` } },
            { target: { url: `${HOOK}/b2`, method: "PUT", headers: { "x-a": "1" }, body: { n: 2 } }, delay: "1h", priority: 3, idempotency_key: "batch-get-2" },
            {
              target: { url: `${HOOK}/b3` },
              run_at: new Date(Date.now() + 60_000).toISOString(),
              window: "30s",
              expires_at: new Date(Date.now() + 3_600_000).toISOString(),
            },
          ],
        });
        expect(r.status).toBe(200);
        expect(r.body.jobs).toHaveLength(3);
        for (const j of r.body.jobs) {
          const g = await api(rt, "GET", `/v1/jobs/${j.id}`);
          expect(g.status).toBe(200);
          const { attempt_log: _, ...rest } = g.body;
          expect(rest).toEqual(j);
        }
      });

      test("unknown id → 404 with the error shape; a non-UUID id → 404", async () => {
        expectError(await api(rt, "GET", `/v1/jobs/${Bun.randomUUIDv7()}`), 404);
        expectError(await api(rt, "GET", "/v1/jobs/not-a-uuid"), 404);
        expectError(await api(rt, "GET", "/v1/jobs/1'%20OR%201=1"), 404);
      });
    });

    describe("list", () => {
      test("filters: status, due_before, due_after, schedule_id", async () => {
        const t = "filters";
        const a = await mustCreate(rt, { tenant: t, run_at: "2031-01-01T00:00:00Z" });
        const b = await mustCreate(rt, { tenant: t, run_at: "2031-02-01T00:00:00Z" });
        const c = await mustCreate(rt, { tenant: t, run_at: "2031-03-01T00:00:00Z" });
        expect((await api(rt, "POST", `/v1/jobs/${c.id}/cancel`, {})).status).toBe(200);
        const base = {
          tenant: t,
          priority: 0,
          idempotency_key: null,
          request_hash: null,
          target: { url: HOOK, method: "POST", headers: {}, body: null, json: false },
          max_attempts: 3,
          backoff_base_ms: 1000,
          backoff_max_ms: 60_000,
          timeout_ms: 30_000,
          expires_at: null,
          window_ms: 0,
          async: false,
        };
        const s1 = Bun.randomUUIDv7();
        const s2 = Bun.randomUUIDv7();
        const s3 = Bun.randomUUIDv7();
        await insertJobs(tdb.db, [
          { ...base, id: s1, due_at: new Date("2031-04-01T09:00:00Z"), schedule_id: "sched-x", nominal_time: new Date("2031-04-01T09:00:00Z") },
          { ...base, id: s2, due_at: new Date("2031-04-02T09:00:00Z"), schedule_id: "sched-x", nominal_time: new Date("2031-04-02T09:00:00Z") },
          { ...base, id: s3, due_at: new Date("2031-04-01T09:00:00Z"), schedule_id: "sched-y", nominal_time: new Date("2031-04-01T09:00:00Z") },
        ]);
        const ids = async (q: string) => {
          const r = await api(rt, "GET", `/v1/jobs?tenant=${t}&${q}`);
          expect(r.status).toBe(200);
          return (r.body.items as any[]).map((j) => j.id).sort();
        };
        expect(await ids("")).toEqual([a.id, b.id, c.id, s1, s2, s3].sort());
        expect(await ids("status=scheduled")).toEqual([a.id, b.id, s1, s2, s3].sort());
        expect(await ids("status=cancelled")).toEqual([c.id]);
        expect(await ids("status=running")).toEqual([]);
        expect(await ids("due_before=2031-02-01T00:00:00Z")).toEqual([a.id]);
        expect(await ids("due_after=2031-02-01T00:00:00Z&due_before=2031-03-15T00:00:00Z")).toEqual([b.id, c.id].sort());
        expect(await ids("due_after=2031-01-15T00:00:00Z&due_before=2031-02-15T00:00:00Z&status=scheduled")).toEqual([b.id]);
        expect(await ids("schedule_id=sched-x")).toEqual([s1, s2].sort());
        expect(await ids("schedule_id=sched-x&due_before=2031-04-02T00:00:00Z")).toEqual([s1]);
        expect(await ids("schedule_id=nope")).toEqual([]);
        const occ = (await api(rt, "GET", `/v1/jobs/${s1}`)).body;
        expect(occ).toMatchObject({ schedule_id: "sched-x", nominal_time: "2031-04-01T09:00:00.000Z" });
        expectError(await api(rt, "GET", "/v1/jobs?due_before=yesterday"), 400, "due_before");
        expectError(await api(rt, "GET", "/v1/jobs?due_after=2031-01-01T00:00:00"), 400, "due_after");
      });

      test("cursor pagination: 7 jobs by 3 → 3, 3, 1, no duplicates, null cursor at the end", async () => {
        const made = new Set<string>();
        for (let i = 0; i < 7; i++) made.add((await mustCreate(rt, { tenant: "pages", delay: `${i + 1}m` })).id);
        const pages = await allPages(rt, "tenant=pages", 3);
        expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
        const seen = pages.flat().map((j) => j.id);
        expect(new Set(seen).size).toBe(seen.length);
        expect(new Set(seen)).toEqual(made);
        // A page that holds exactly the rest still says null: nothing follows.
        const exact = await allPages(rt, "tenant=pages", 7);
        expect(exact.map((p) => p.length)).toEqual([7]);
        expect(new Set(exact.flat().map((j) => j.id))).toEqual(made);
      });

      test("order=desc: newest first, the cursor walks on to older jobs; a bad order → 400", async () => {
        const made: string[] = [];
        for (let i = 0; i < 5; i++) made.push((await mustCreate(rt, { tenant: "newest", delay: `${5 - i}m` })).id);
        const pages = await allPages(rt, "tenant=newest&order=desc", 2);
        expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
        expect(pages.flat().map((j) => j.id)).toEqual([...made].reverse());
        const asc = await allPages(rt, "tenant=newest&order=asc", 5);
        expect(asc.flat().map((j) => j.id)).toEqual(made);
        expectError(await api(rt, "GET", "/v1/jobs?order=newest"), 400, "order");
      });

      test("bad limit, status and cursor → 400 naming the parameter", async () => {
        for (const l of ["0", "1001", "x", "-1", "2.5"]) expectError(await api(rt, "GET", `/v1/jobs?limit=${l}`), 400, "limit");
        expect((await api(rt, "GET", "/v1/jobs?limit=1000")).status).toBe(200);
        expect((await api(rt, "GET", "/v1/jobs?limit=1")).status).toBe(200);
        expectError(await api(rt, "GET", "/v1/jobs?status=bogus"), 400, "status");
        expectError(await api(rt, "GET", "/v1/jobs?cursor=not-a-cursor"), 400, "cursor");
        expectError(await api(rt, "GET", `/v1/jobs?cursor=${Buffer.from("hello world").toString("base64url")}`), 400, "cursor");
      });
    });

    describe("cancel", () => {
      test("scheduled → 200 cancelled, version+1; again → 409", async () => {
        const j = await mustCreate(rt, { delay: "1h" });
        const r = await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {});
        expect(r.status).toBe(200);
        expect(r.body).toMatchObject({ id: j.id, status: "cancelled", version: 2 });
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body).toMatchObject({ status: "cancelled", version: 2 });
        expectError(await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {}), 409);
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body.version).toBe(2);
      });

      test("if_version mismatch → 409 and no change; matching → 200; body may be empty", async () => {
        const j = await mustCreate(rt, { delay: "1h" });
        expectError(await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, { if_version: 5 }), 409);
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body).toMatchObject({ status: "scheduled", version: 1 });
        const ok = await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, { if_version: 1 });
        expect(ok.status).toBe(200);
        expect(ok.body.status).toBe("cancelled");
        const k = await mustCreate(rt, { delay: "1h" });
        expect((await api(rt, "POST", `/v1/jobs/${k.id}/cancel`)).status).toBe(200);
      });

      test("unknown → 404", async () => {
        expectError(await api(rt, "POST", `/v1/jobs/${Bun.randomUUIDv7()}/cancel`, {}), 404);
        expectError(await api(rt, "POST", "/v1/jobs/nope/cancel", {}), 404);
      });

      test("a running job → 202 with cancel_requested, stays running", async () => {
        const j = await mustCreate(rt, { delay: "1h" });
        await makeRunning(j.id);
        const r = await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {});
        expect(r.status).toBe(202);
        expect(r.body).toMatchObject({ id: j.id, status: "running", cancel_requested: true });
        const g = await api(rt, "GET", `/v1/jobs/${j.id}`);
        expect(g.body).toMatchObject({ status: "running", cancel_requested: true });
        const [row] = await tdb.db.query<{ lease_owner: string | null }>("SELECT lease_owner FROM jobs WHERE id=$1", [j.id]);
        expect(row.lease_owner).toBe("x");
      });
    });

    describe("reschedule (PATCH)", () => {
      test('{ delay: "1h" } → 200, due moves, version+1; run_at exact', async () => {
        const j = await mustCreate(rt, { delay: "5m" });
        const before = Date.now();
        const r = await api(rt, "PATCH", `/v1/jobs/${j.id}`, { delay: "1h" });
        expect(r.status).toBe(200);
        expect(r.body).toMatchObject({ id: j.id, status: "scheduled", version: 2 });
        expect(Date.parse(r.body.due_at)).toBeGreaterThanOrEqual(before + 3_600_000);
        expect(Date.parse(r.body.due_at)).toBeLessThanOrEqual(Date.now() + 3_600_000);
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body.due_at).toBe(r.body.due_at);
        const r2 = await api(rt, "PATCH", `/v1/jobs/${j.id}`, { run_at: "2032-05-05T05:05:05Z", if_version: 2 });
        expect(r2.status).toBe(200);
        expect(r2.body).toMatchObject({ due_at: "2032-05-05T05:05:05.000Z", version: 3 });
      });

      test("stale if_version → 409 and no change", async () => {
        const j = await mustCreate(rt, { run_at: "2032-01-01T00:00:00Z" });
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { delay: "1h", if_version: 7 }), 409);
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body).toMatchObject({ version: 1, due_at: "2032-01-01T00:00:00.000Z" });
      });

      test("on a cancelled or running job → 409; unknown → 404", async () => {
        const j = await mustCreate(rt);
        await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {});
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { delay: "1h" }), 409);
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body.status).toBe("cancelled");
        const k = await mustCreate(rt, { delay: "1h" });
        await makeRunning(k.id);
        expectError(await api(rt, "PATCH", `/v1/jobs/${k.id}`, { delay: "2h" }), 409);
        expect((await api(rt, "GET", `/v1/jobs/${k.id}`)).body.status).toBe("running");
        expectError(await api(rt, "PATCH", `/v1/jobs/${Bun.randomUUIDv7()}`, { delay: "1h" }), 404);
      });

      test("neither or both of run_at and delay → 400", async () => {
        const j = await mustCreate(rt, { delay: "1h" });
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, {}), 400);
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { if_version: 1 }), 400);
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { run_at: "2032-01-01T00:00:00Z", delay: "1h" }), 400);
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { delay: "soon" }), 400, "delay");
        expectError(await api(rt, "PATCH", `/v1/jobs/${j.id}`, { run_at: "2032-01-01T00:00:00" }), 400, "run_at");
        expect((await api(rt, "GET", `/v1/jobs/${j.id}`)).body.version).toBe(1);
      });
    });

    describe("batch", () => {
      test("3 items, the middle invalid → 200; valid items created, the invalid one an error with its path", async () => {
        const r = await api(rt, "POST", "/v1/jobs/batch", {
          jobs: [
            { target: { url: HOOK }, delay: "1m", idempotency_key: "batch-0" },
            { target: { url: "ftp://example.com/x" } },
            { target: { url: HOOK, body: { n: 2 } }, run_at: "2033-01-01T00:00:00Z" },
          ],
        });
        expect(r.status).toBe(200);
        expect(r.body.jobs).toHaveLength(3);
        const [a, err, c] = r.body.jobs;
        expect(a).toMatchObject({ status: "scheduled", idempotency_key: "batch-0" });
        expect(a.id).toMatch(UUID_V7);
        expect(c).toMatchObject({ status: "scheduled", due_at: "2033-01-01T00:00:00.000Z", target: { body: { n: 2 } } });
        expect(Object.keys(err)).toEqual(["error"]);
        expectError({ status: 200, body: err }, 200, /^jobs\.1\./);
        expect(err.error.path).toBe("jobs.1.target.url");
        expect((await api(rt, "GET", `/v1/jobs/${a.id}`)).status).toBe(200);
        expect((await api(rt, "GET", `/v1/jobs/${c.id}`)).status).toBe(200);
      });

      test("more than 1000 items → 400, nothing created; jobs missing → 400", async () => {
        const count = async () => Number((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n);
        const n0 = await count();
        const big = Array.from({ length: 1001 }, () => ({ target: { url: HOOK } }));
        expectError(await api(rt, "POST", "/v1/jobs/batch", { jobs: big }), 400, "jobs");
        expect(await count()).toBe(n0);
        expectError(await api(rt, "POST", "/v1/jobs/batch", {}), 400, "jobs");
        expectError(await api(rt, "POST", "/v1/jobs/batch", { jobs: "nope" }), 400, "jobs");
        expectError(await api(rt, "POST", "/v1/jobs/batch", "[1,2"), 400);
        const empty = await api(rt, "POST", "/v1/jobs/batch", { jobs: [] });
        expect(empty).toMatchObject({ status: 200, body: { jobs: [] } });
      });
    });
  });

  describe(`metrics (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, {}, { mode: "api" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
    });

    test("scheduler_jobs{status} counts jobs; delivery and lag families are declared", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await mustCreate(rt, { delay: "1h" })).id);
      await api(rt, "POST", `/v1/jobs/${ids[0]}/cancel`, {});
      const text = await eventually(
        async () => {
          const res = await fetch(`${rt.url}/metrics`);
          expect(res.status).toBe(200);
          const t = await res.text();
          return /^scheduler_jobs\{status="scheduled"\} 3$/m.test(t) && /^scheduler_jobs\{status="cancelled"\} 1$/m.test(t) ? t : null;
        },
        6000,
        "scheduler_jobs gauge to show 3 scheduled, 1 cancelled",
      );
      expect(text).toMatch(/^scheduler_jobs\{status="running"\} 0$/m);
      for (const fam of ["scheduler_deliveries_total", "scheduler_scheduling_lag_seconds", "scheduler_jobs"]) {
        expect(text).toMatch(new RegExp(`^# HELP ${fam} \\S`, "m"));
        expect(text).toMatch(new RegExp(`^# TYPE ${fam} (counter|histogram|gauge)$`, "m"));
      }
      expect(text).toMatch(/^# TYPE scheduler_deliveries_total counter$/m);
      expect(text).toMatch(/^# TYPE scheduler_scheduling_lag_seconds histogram$/m);
      expect(text).toMatch(/^# TYPE scheduler_jobs gauge$/m);
      // No job ids or URLs as label values.
      for (const id of ids) expect(text).not.toContain(id);
      expect(text).not.toContain("example.com");
    });
  });
}
