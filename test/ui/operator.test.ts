// The dashboard as an operator uses it: a job's page with its attempt log, the job list's
// filters, and the actions (cancel, replay, pause/resume a schedule), each through the HTTP
// API with the pasted token. Headless Chromium (Debian's package, driven by playwright-core)
// against a real scheduler on real Postgres and a real loopback target; real clicks.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";
import { tok } from "../helpers/tokens.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ADMIN = tok("tokAdmin");
const READER = tok("tokRead");
const TOKENS = `${ADMIN}:*:admin;${READER}:acme:jobs:read`;
const auth = (t: string) => ({ authorization: `Bearer ${t}` });

let tdb: TestDb;
let rt: Runtime;
let target: Target;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];
const elsewhere: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `chromium not found at ${CHROMIUM}: the dashboard tests need it. Install Debian's package (apt-get install chromium; scripts/test.sh does this when run as root) or set CHROMIUM_PATH`,
    );
  }
  tdb = await freshDb("postgres");
  rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS });
  // /slow: the first call outlasts its 1 s timeout (possibly delivered), later ones answer at
  // once; /hang answers after 30 s; /flaky: 400 (dead at once) the first time, then 200;
  // /gone: always 404.
  target = new Target(async (r, n) => {
    if (r.path === "/slow" && n === 1) await Bun.sleep(3_000);
    if (r.path === "/hang") await Bun.sleep(30_000);
    const status = r.path === "/gone" ? 404 : r.path === "/flaky" && n === 1 ? 400 : 200;
    return new Response(status === 200 ? "ok" : "no", { status });
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.route(
    (url) => url.origin !== rt.url,
    (r) => {
      elsewhere.push(r.request().url());
      return r.abort();
    },
  );
  await page.goto(`${rt.url}/ui`);
  await useToken(ADMIN);
});

afterAll(async () => {
  await browser?.close();
  target?.stop();
  await rt?.stop();
  await tdb?.close();
});

async function useToken(token: string) {
  await page.evaluate((t) => localStorage.setItem("scheduler.token", t), token);
  await page.reload();
}

async function create(body: Record<string, unknown>): Promise<string> {
  const r = await api(rt, "POST", "/v1/jobs", body, auth(ADMIN));
  expect(r.status).toBe(201);
  return r.body.id as string;
}

async function job(id: string) {
  return (await api(rt, "GET", `/v1/jobs/${id}`, undefined, auth(ADMIN))).body;
}

async function until(id: string, status: string) {
  await eventually(async () => (await job(id)).status === status, 20_000, `job ${id} to be ${status}`);
}

/** The job ids the list shows, in order. */
const shownJobs = (p: Page) => p.$$eval("#jobs-table tr[data-job]", (rows) => rows.map((r) => r.getAttribute("data-job")));

/** The ids GET /v1/jobs answers for these filters, as the page asks for them. */
async function listed(q: string): Promise<string[]> {
  const r = await api(rt, "GET", `/v1/jobs?order=desc&limit=25&${q}`, undefined, auth(ADMIN));
  return (r.body.items as { id: string }[]).map((j) => j.id);
}

/** The list on the page and the API's answer agree (the page redraws every 3 s). */
async function listMatches(q: string) {
  let last = "";
  await eventually(
    async () => {
      const [shown, want] = [await shownJobs(page), await listed(q)];
      last = `page ${JSON.stringify(shown)} vs api ${JSON.stringify(want)}`;
      return shown.length > 0 && JSON.stringify(shown) === JSON.stringify(want);
    },
    15_000,
    `the list for ${q} (${last})`,
  );
}

/** The page's URL fragment becomes h (the page's CSP forbids waitForFunction's string eval). */
async function hashIs(h: string) {
  await eventually(() => new URL(page.url()).hash === h, 10_000, `the URL fragment ${h} (it is ${new URL(page.url()).hash})`);
}

async function cell(row: string, col: string) {
  return (await page.textContent(`${row} td:nth-child(${col})`))?.trim();
}

describe("dashboard: job page", () => {
  test("shows the attempt log: outcomes, timings, fencing tokens, possibly_delivered; opened from the list", async () => {
    const id = await create({ tenant: "acme", target: { url: `${target.url}/slow` }, timeout: "1s", retry: { max_attempts: 3, base: "100ms", max: "100ms" } });
    await until(id, "succeeded");
    const got = await job(id);
    expect(got.attempt_log.map((a: { outcome: string }) => a.outcome)).toEqual(["unknown", "success"]);

    await page.goto(`${rt.url}/ui#/`);
    await page.click(`#jobs-table tr[data-job="${id}"] a.job-link`, { timeout: 15_000 });
    expect(new URL(page.url()).hash).toBe(`#/jobs/${id}`);
    await page.waitForSelector("#attempts-table tr[data-attempt]");
    expect(await page.isHidden("#overview")).toBe(true);
    expect(await page.textContent("#job-id")).toBe(id);
    expect(await page.textContent("#job-status")).toContain("succeeded");

    const rows = await page.$$("#attempts-table tr[data-attempt]");
    expect(rows).toHaveLength(2);
    const first = '#attempts-table tr[data-attempt="1"]';
    const second = '#attempts-table tr[data-attempt="2"]';
    // Columns: #, attempt, started, took, after previous, outcome, HTTP, fencing token, worker, flags, error.
    expect(await cell(first, "6")).toBe("unknown");
    expect(await cell(first, "10")).toContain("possibly delivered");
    expect(await cell(first, "7")).toBe("—");
    expect(await cell(first, "11")).toContain("timeout");
    expect(await cell(second, "6")).toBe("success");
    expect(await cell(second, "7")).toBe("200");
    expect(await cell(second, "10")).toBe("");
    // The first call took its timeout: at least a second.
    expect(await cell(first, "4")).toMatch(/^(1\.\d|[2-9]\.\d) s$/);
    expect(await cell(second, "5")).not.toBe("—");
    // The fencing token each call carried, as the target received it, and as the API says.
    const calls = target.callsTo("/slow");
    expect(calls).toHaveLength(2);
    for (const [i, row] of [first, second].entries()) {
      const shown = (await cell(row, "8"))!.replaceAll(",", "");
      expect(shown).toBe(String(got.attempt_log[i].epoch));
      expect(shown).toBe(calls[i].headers["scheduler-fencing-token"]);
      expect(await page.getAttribute(`${row} td:nth-child(2) code`, "title")).toBe(got.attempt_log[i].attempt_id);
    }
    expect(await page.textContent("#job-fields")).toContain(`POST ${target.url}/slow`);
    // Finished: nothing to cancel or replay.
    expect(await page.$("#job-actions button")).toBeNull();
  }, 60_000);

  test("shows whatever outcome string the API returns (e.g. verified), and an unknown job's 404", async () => {
    const id = await create({ tenant: "acme", target: { url: `${target.url}/ok` } });
    await until(id, "succeeded");
    // An outcome this page has no colour for: shown as given.
    await tdb.db.query("UPDATE attempts SET outcome = 'verified' WHERE job_id = $1", [id]);
    await page.goto(`${rt.url}/ui#/jobs/${id}`);
    await page.waitForSelector('#attempts-table tr[data-outcome="verified"] .o-verified');
    expect(await cell('#attempts-table tr[data-attempt="1"]', "6")).toBe("verified");

    await page.goto(`${rt.url}/ui#/jobs/01a2302a-0000-7000-8000-000000000000`);
    const msg = await (await page.waitForSelector(".job-error")).textContent();
    expect(msg).toContain("404");
  });
});

describe("dashboard: job list filters", () => {
  let dead = "";
  let later = "";
  let fromSchedule = "";
  beforeAll(async () => {
    dead = await create({ tenant: "acme", target: { url: `${target.url}/gone` }, retry: { max_attempts: 1 } });
    later = await create({ tenant: "globex", target: { url: `${target.url}/ok` }, delay: "1h" });
    const s = await api(
      rt,
      "POST",
      "/v1/schedules",
      { id: "hourly-sync", tenant: "globex", cron: "0 * * * *", timezone: "UTC", target: { url: `${target.url}/ok` } },
      auth(ADMIN),
    );
    expect(s.status).toBe(201);
    const t = await api(rt, "POST", "/v1/schedules/hourly-sync/trigger?tenant=globex", {}, auth(ADMIN));
    expect(t.status).toBeLessThan(300);
    fromSchedule = (t.body.job?.id ?? t.body.id) as string;
    expect(fromSchedule).toMatch(/^[0-9a-f-]{36}$/);
    await until(dead, "dead");
  });

  test("by status: the select filters at once, the URL keeps it, a reload shows the same", async () => {
    await page.goto(`${rt.url}/ui#/`);
    await page.waitForSelector("#jobs-table tr[data-job]");
    await page.selectOption("#filter-status", "dead");
    await hashIs("#/?status=dead");
    await listMatches("status=dead");
    expect(await shownJobs(page)).toContain(dead);
    expect(await page.$$eval("#jobs-table tr[data-job]", (rows) => rows.every((r) => r.querySelector(".s-dead")))).toBe(true);
    await page.reload();
    await listMatches("status=dead");
    expect(await page.inputValue("#filter-status")).toBe("dead");
  });

  test("by tenant and by schedule (typed, or from a schedule's jobs link), and Clear", async () => {
    await page.click("#filter-clear");
    await hashIs("#/");
    await page.fill("#filter-tenant", "globex");
    await page.click('#job-filters button[type="submit"]');
    await hashIs("#/?tenant=globex");
    await listMatches("tenant=globex");
    const shown = await shownJobs(page);
    expect(shown).toContain(later);
    expect(shown).toContain(fromSchedule);
    expect(shown).not.toContain(dead);

    await page.click('#schedules-table tr[data-schedule="hourly-sync"] a.schedule-jobs');
    await hashIs("#/?tenant=globex&schedule_id=hourly-sync");
    await listMatches("tenant=globex&schedule_id=hourly-sync");
    expect(await shownJobs(page)).toEqual([fromSchedule]);
    expect(await page.inputValue("#filter-schedule")).toBe("hourly-sync");

    await page.click("#filter-clear");
    await hashIs("#/");
    // The fragment changes first; the form is redrawn by the hashchange handler after it.
    await eventually(async () => (await page.inputValue("#filter-tenant")) === "", 10_000, "the tenant filter cleared");
    await eventually(async () => (await shownJobs(page)).includes(dead), 10_000, "the unfiltered list");
  });

  test("pages through a long list with the API's cursor (older →, ← newest)", async () => {
    const jobs = Array.from({ length: 27 }, () => ({ tenant: "paged", target: { url: `${target.url}/ok` }, delay: "1h" }));
    expect((await api(rt, "POST", "/v1/jobs/batch", { jobs }, auth(ADMIN))).status).toBe(200);
    await page.goto(`${rt.url}/ui#/?tenant=paged`);
    await listMatches("tenant=paged");
    const first = await shownJobs(page);
    expect(first).toHaveLength(25);
    expect(await page.$("#jobs-table a.newest")).toBeNull();
    await page.click("#jobs-table a.older");
    await eventually(async () => (await shownJobs(page)).length === 2, 10_000, "the second page");
    const second = await shownJobs(page);
    const all = (await api(rt, "GET", "/v1/jobs?order=desc&limit=100&tenant=paged", undefined, auth(ADMIN))).body.items.map((j: { id: string }) => j.id);
    expect([...first, ...second]).toEqual(all);
    expect(await page.$("#jobs-table a.older")).toBeNull();
    await page.click("#jobs-table a.newest");
    await hashIs("#/?tenant=paged");
    await eventually(async () => (await shownJobs(page)).length === 25, 10_000, "the first page again");
  });

  test("a filter that matches nothing says so", async () => {
    await page.goto(`${rt.url}/ui#/?tenant=nobody-here`);
    await page.waitForSelector('#jobs-table p:has-text("no jobs match these filters")');
  });
});

describe("dashboard: operator actions", () => {
  test("cancels a scheduled job from its page, with a reason that reaches the audit log; the back link keeps the filters", async () => {
    const id = await create({ tenant: "acme", target: { url: `${target.url}/ok` }, delay: "1h" });
    await page.goto(`${rt.url}/ui#/?tenant=acme&status=scheduled`);
    await page.click(`#jobs-table tr[data-job="${id}"] a.job-link`, { timeout: 15_000 });
    await page.click("#job-actions button.open-cancel");
    await page.fill(".action-reason", "customer withdrew (operator e2e)");
    await page.click(".action-confirm");
    await page.waitForSelector(".action-done");
    expect(await page.textContent(".action-done")).toContain("cancelled");
    await page.waitForSelector("#job-status .s-cancelled");
    expect(await page.$("#job-actions button.open-cancel")).toBeNull();
    expect((await job(id)).status).toBe("cancelled");
    const audit = JSON.stringify((await api(rt, "GET", "/v1/audit?limit=100", undefined, auth(ADMIN))).body);
    expect(audit).toContain("customer withdrew (operator e2e)");
    await page.click("#back");
    await hashIs("#/?tenant=acme&status=scheduled");
    // The fragment changes first; the overview is drawn by the hashchange handler after it.
    await page.waitForSelector("#overview", { state: "visible", timeout: 10_000 });
    await eventually(async () => (await page.inputValue("#filter-status")) === "scheduled", 10_000, "the status filter kept");
  });

  test("cancels a running job: its call is aborted and it ends cancelled", async () => {
    const id = await create({ tenant: "acme", target: { url: `${target.url}/hang` }, timeout: "60s" });
    await until(id, "running");
    await page.goto(`${rt.url}/ui#/jobs/${id}`);
    await page.waitForSelector('#attempts-table tr[data-outcome="in_flight"]');
    await page.click("#job-actions button.open-cancel");
    expect(await page.textContent(".action-confirm")).toContain("aborts the call");
    await page.click(".action-confirm");
    await page.waitForSelector('.action-done:has-text("cancel requested")');
    await until(id, "cancelled");
    await page.waitForSelector("#job-status .s-cancelled", { timeout: 10_000 });
    expect(target.callsTo("/hang")).toHaveLength(1);
  }, 40_000);

  test("replays a dead job from its page (opened from the dead letters); it runs again and the log shows both calls", async () => {
    const id = await create({ tenant: "globex", target: { url: `${target.url}/flaky` }, retry: { max_attempts: 1 } });
    await until(id, "dead");
    await page.goto(`${rt.url}/ui#/`);
    await page.click(`#dlq-table tr[data-dead="${id}"] a`, { timeout: 15_000 });
    await hashIs(`#/jobs/${id}`);
    await page.click("#job-actions button.open-replay");
    await page.fill(".action-reason", "target fixed (operator e2e)");
    await page.click(".action-confirm");
    await page.waitForSelector(".action-done");
    await page.waitForSelector("#job-status .s-succeeded", { timeout: 20_000 });
    await page.waitForSelector('#attempts-table tr[data-attempt="2"][data-outcome="success"]');
    expect(await cell('#attempts-table tr[data-attempt="1"]', "6")).toBe("permanent");
    expect(await cell('#attempts-table tr[data-attempt="1"]', "7")).toBe("400");
    expect((await job(id)).replays).toBe(1);
  }, 40_000);

  test("a token without the scope sees the API's 403 where it clicked, and nothing changes", async () => {
    const id = await create({ tenant: "acme", target: { url: `${target.url}/ok` }, delay: "1h" });
    await useToken(READER);
    try {
      await page.goto(`${rt.url}/ui#/jobs/${id}`);
      await page.click("#job-actions button.open-cancel");
      await page.click(".action-confirm");
      const msg = await (await page.waitForSelector(".action-error")).textContent();
      expect(msg).toContain("403");
      expect((await job(id)).status).toBe("scheduled");
    } finally {
      await useToken(ADMIN);
    }
  });

  test("pauses a schedule with a reason and resumes it; a read-only token is refused", async () => {
    const r = await api(
      rt,
      "POST",
      "/v1/schedules",
      { id: "nightly", tenant: "acme", cron: "0 3 * * *", timezone: "Europe/Berlin", target: { url: `${target.url}/ok` } },
      auth(ADMIN),
    );
    expect(r.status).toBe(201);
    const row = '#schedules-table tr[data-schedule="nightly"][data-tenant="acme"]';
    const schedule = async () => (await api(rt, "GET", "/v1/schedules/nightly?tenant=acme", undefined, auth(ADMIN))).body;
    await page.goto(`${rt.url}/ui#/`);
    await page.click(`${row} button.pause`, { timeout: 15_000 });
    await page.fill(".pause-reason", "warehouse maintenance (operator e2e)");
    await page.click(".pause-confirm");
    await page.waitForSelector(`${row} .paused-reason:has-text("warehouse maintenance")`);
    expect(await page.textContent(`${row} td.state`)).toContain("paused");
    expect(await schedule()).toMatchObject({ paused: true, paused_reason: "warehouse maintenance (operator e2e)" });

    await page.click(`${row} button.resume`);
    await page.waitForSelector(`${row} button.pause`);
    expect((await page.textContent(`${row} td.state`))?.trim()).toBe("active");
    expect(await schedule()).toMatchObject({ paused: false, paused_reason: null });

    await useToken(READER);
    try {
      await page.click(`${row} button.pause`, { timeout: 15_000 });
      await page.click(".pause-confirm");
      const msg = await (await page.waitForSelector(".schedule-error")).textContent();
      expect(msg).toContain("403");
      expect((await schedule()).paused).toBe(false);
    } finally {
      await useToken(ADMIN);
    }
    expect(pageErrors).toEqual([]);
    expect(elsewhere).toEqual([]);
  }, 40_000);
});
