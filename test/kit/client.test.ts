import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { collect, createClient, SchedulerApiError, SchedulerNetworkError, type JobInput } from "../../src/kit/client/index.ts";
import { clientTypesFor, CLIENT_TYPES_PATH } from "../../scripts/gen-client.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { startScheduler } from "../helpers/scheduler.ts";
import { closedPort } from "../helpers/redis.ts";
import { Target } from "../helpers/target.ts";
import { tok, tokenSpec } from "../helpers/tokens.ts";

const TOKENS = tokenSpec("tok-admin:*:jobs:read,jobs:write,admin;tok-a:acme:jobs:read,jobs:write");

describe("scheduler/client against a real scheduler", () => {
  let t: TestDb;
  let rt: Runtime;
  const target = new Target(() => new Response("ok"));
  beforeAll(async () => {
    t = await freshDb("pglite");
    rt = await startScheduler(t.db, { SCHEDULER_TOKENS: TOKENS });
  });
  afterAll(async () => {
    await rt?.stop();
    await t?.close();
    target.stop();
  });

  test("the checked-in types match the document the server serves (CI fails on drift: run `npm run gen:client`)", async () => {
    const served = await (await fetch(`${rt.url}/openapi.json`)).json();
    expect(await clientTypesFor(served)).toBe(await Bun.file(CLIENT_TYPES_PATH).text());
  });

  test("create, get, cancel; the job is typed from the document", async () => {
    const c = createClient({ baseUrl: rt.url!, token: tok("tok-a") });
    const job = await c.jobs.create({ target: { url: `${target.url}/a`, body: { n: 1 } }, delay: "1h" });
    expect(job.status).toBe("scheduled");
    expect(job.tenant).toBe("acme");
    // A create without a key gets one, so its retries cannot create twice.
    expect(job.idempotency_key).toMatch(/^client-/);
    const got = await c.jobs.get(job.id);
    expect(got.attempt_log).toEqual([]);
    const cancelled = await c.jobs.cancel(job.id, { reason: "test" });
    expect(cancelled.status).toBe("cancelled");
    // @ts-expect-error: the document says target.url is a string (the types are not `any`)
    const wrong: JobInput = { target: { url: 1 } };
    expect(wrong).toBeDefined();
  });

  test("errors are typed values with status, code and path", async () => {
    const c = createClient({ baseUrl: rt.url!, token: tok("tok-a") });
    const bad = await c.jobs.create({ target: { url: "ftp://x" } }).catch((e) => e);
    expect(bad).toBeInstanceOf(SchedulerApiError);
    expect(bad).toMatchObject({ status: 400, code: "invalid_request", path: "target.url" });
    const missing = await c.jobs.get("0190a0b0-0000-7000-8000-000000000000").catch((e) => e);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    const anon = await createClient({ baseUrl: rt.url! })
      .jobs.list()
      .catch((e) => e);
    expect(anon).toMatchObject({ status: 401 });
  });

  test("idempotent create: answers lost after the server created the job are retried, and one job exists", async () => {
    let lost = 0;
    const flaky = async (req: Request) => {
      const res = await fetch(req);
      // The request reached the server and was answered; the answer is lost on the way back.
      if (req.method === "POST" && lost < 2) {
        lost++;
        throw new TypeError("socket hang up");
      }
      return res;
    };
    const c = createClient({ baseUrl: rt.url!, token: tok("tok-a"), fetch: flaky as typeof fetch, retry: { baseMs: 10 } });
    const job = await c.jobs.create({ target: { url: `${target.url}/b` }, delay: "1h", idempotency_key: "client-retry-1" });
    expect(lost).toBe(2);
    const all = await collect(c.jobs.iterate({ status: "scheduled" }));
    expect(all.filter((j) => j.idempotency_key === "client-retry-1").map((j) => j.id)).toEqual([job.id]);
    const none = createClient({ baseUrl: `http://127.0.0.1:${await closedPort()}`, retry: { attempts: 2, baseMs: 10 } });
    const err = await none.jobs.create({ target: { url: `${target.url}/c` } }).catch((e) => e);
    expect(err).toBeInstanceOf(SchedulerNetworkError);
    expect(err.message).toContain("after 2 tries");
  });

  test("pagination helpers walk every page", async () => {
    const c = createClient({ baseUrl: rt.url!, token: tok("tok-admin") });
    const made = [];
    for (let i = 0; i < 7; i++) made.push(await c.jobs.create({ target: { url: `${target.url}/p` }, delay: "2h", tenant: "pages" }));
    const page = await c.jobs.list({ limit: 3, tenant: "pages" });
    expect(page.items).toHaveLength(3);
    expect(page.next_cursor).not.toBeNull();
    const all = await collect(c.jobs.iterate({ limit: 3, tenant: "pages" }));
    expect(all.map((j) => j.id)).toEqual(made.map((j) => j.id));
    expect(await collect(c.jobs.iterate({ limit: 2, tenant: "pages" }), 5)).toHaveLength(5);
  });

  test("schedules: create, preview, pause, resume, list; dlq and cluster", async () => {
    const c = createClient({ baseUrl: rt.url!, token: tok("tok-admin") });
    const s = await c.schedules.create({ id: "client-s", cron: "0 9 * * *", timezone: "Europe/London", target: { url: `${target.url}/s` } });
    expect(s.next_fire_at).not.toBeNull();
    const preview = await c.schedules.preview("client-s", 3);
    expect(preview).toHaveLength(3);
    expect(preview[0].local).toMatch(/T09:00:00[+-]\d\d:\d\d$/);
    expect((await c.schedules.pause("client-s", "maintenance")).paused).toBe(true);
    expect((await c.schedules.resume("client-s")).paused).toBe(false);
    expect((await collect(c.schedules.iterate())).map((x) => x.id)).toContain("client-s");
    expect((await c.dlq.list()).items).toEqual([]);
    expect((await c.cluster.get()).role).toBe("home");
  });
});
