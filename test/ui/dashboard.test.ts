// The dashboard at /ui, end to end: headless Chromium (Debian's package, driven by
// playwright-core) against a real scheduler on real Postgres with a real loopback target.
// scripts/test.sh installs chromium when it is missing and it may; without it these tests
// fail (they never skip), saying what to install.
import { tok } from "../helpers/tokens.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { createApp } from "../../src/api/app.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { silentLogger } from "../../src/obs/log.ts";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler, testConfig } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACT = "test-artifacts/dashboard.png";
const ADMIN = tok("tokAdmin");
const READER = tok("tokRead");
const TOKENS = `${ADMIN}:*:admin;${READER}:acme:jobs:read`;
const auth = (t: string) => ({ authorization: `Bearer ${t}` });

let tdb: TestDb;
let rt: Runtime;
let target: Target;
let browser: Browser;
let page: Page;
/** Requests the page made to anywhere but our schedulers (refused; there must be none). */
const elsewhere: string[] = [];
const origins: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `chromium not found at ${CHROMIUM}: the dashboard tests need it. Install Debian's package (apt-get install chromium; scripts/test.sh does this when run as root) or set CHROMIUM_PATH`,
    );
  }
  tdb = await freshDb("postgres");
  rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS, SCHEDULER_STATS_INTERVAL: "300ms" });
  // /flaky fails permanently on its first call and succeeds after (a job there dies, and its
  // replay succeeds); /gone always fails permanently.
  target = new Target((r, n) => {
    const status = r.path === "/gone" ? 404 : r.path === "/flaky" && n === 1 ? 400 : 200;
    return new Response(status === 200 ? "ok" : "no", { status });
  });
  // Running as root (CI containers) needs --no-sandbox.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // Nothing but the scheduler itself: the page must work offline.
  origins.push(rt.url!);
  await page.route(
    (url) => !origins.includes(url.origin),
    (r) => {
      elsewhere.push(r.request().url());
      return r.abort();
    },
  );
});

afterAll(async () => {
  await browser?.close();
  target?.stop();
  await rt?.stop();
  await tdb?.close();
});

async function openWithToken(token: string) {
  await page.goto(`${rt.url}/ui`);
  await page.fill("#token", token);
  await page.click("#token-form button");
}

describe("dashboard /ui", () => {
  test("the page and its files need no token and load nothing from elsewhere; only the api mode serves them", async () => {
    const res = await fetch(`${rt.url}/ui`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/ui/app.js">');
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    const js = await fetch(`${rt.url}/ui/app.js`);
    expect(js.headers.get("content-type")).toContain("text/javascript");
    expect(await js.text()).toContain("/v1/stats");
    expect((await fetch(`${rt.url}/ui/style.css`)).headers.get("content-type")).toContain("text/css");
    expect((await fetch(`${rt.url}/ui/nope.js`)).status).toBe(404);
    expect((await fetch(`${rt.url}/ui/toString`)).status).toBe(404);
    // A dispatcher or worker serves health and metrics only.
    const worker = createApp({ db: tdb.db, config: testConfig({}, { mode: "worker" }), metrics: new Metrics(), log: silentLogger, serveApi: false });
    expect((await worker.request("/ui")).status).toBe(404);
    expect((await worker.request("/ui/app.js")).status).toBe(404);
  });

  test("creates a job through the form and shows it succeed, with the health verdict and region", async () => {
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await openWithToken(ADMIN);
    await page.fill("#create-url", `${target.url}/ok`);
    await page.fill("#create-delay", "0s");
    await page.fill("#create-tenant", "acme");
    await page.click("#create-form button");
    const id = await (await page.waitForSelector("#create-result[data-job]")).getAttribute("data-job");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await page.waitForSelector(`#jobs-table tr[data-job="${id}"] .s-succeeded`, { timeout: 15_000 });
    expect((await api(rt, "GET", `/v1/jobs/${id}`, undefined, auth(ADMIN))).body.status).toBe("succeeded");
    expect(target.callsTo("/ok")).toHaveLength(1);
    // What the page shows comes from its latest refresh (every 3 s, and after the create):
    // waited for, not read once. Selectors and reads, not page.waitForFunction: when its
    // predicate is false at first it polls by evaluating a string in the page, which the
    // page's CSP (no 'unsafe-eval') refuses, so it failed whenever the page lagged.
    await page.waitForSelector("#verdict li.ok", { timeout: 30_000 });
    expect(await page.textContent("#verdict")).toContain("OK");
    await page.waitForSelector('#cluster:has-text("home")', { timeout: 30_000 });
    await eventually(async () => Number(await page.textContent("#epoch")) >= 1, 30_000, "the epoch to show");
    await eventually(async () => Number(await page.textContent('[data-status="succeeded"]')) >= 1, 30_000, "the succeeded count to include the job");
    expect(await page.isHidden("#auth-error")).toBe(true);
    expect(errors).toEqual([]);
  });

  test("replays a dead job from the DLQ with a reason; it runs again and succeeds", async () => {
    const created = await api(rt, "POST", "/v1/jobs", { tenant: "globex", target: { url: `${target.url}/flaky` }, retry: { max_attempts: 1 } }, auth(ADMIN));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await eventually(async () => (await api(rt, "GET", `/v1/jobs/${id}`, undefined, auth(ADMIN))).body.status === "dead", 10_000, "the job to die");
    const row = await page.waitForSelector(`#dlq-table tr[data-dead="${id}"]`, { timeout: 10_000 });
    expect(await row.textContent()).toContain("globex");
    // The health verdict names the dead job until it is replayed.
    await page.waitForSelector('#verdict li.warn:has-text("dead job")', { timeout: 30_000 });
    await page.click(`#dlq-table tr[data-dead="${id}"] button.replay`);
    await page.fill(".replay-reason", "target fixed (dashboard e2e)");
    await page.click(".replay-confirm");
    await page.waitForSelector(`#dlq-note:has-text("replayed ${id}")`);
    await page.waitForSelector(`#jobs-table tr[data-job="${id}"] .s-succeeded`, { timeout: 15_000 });
    await page.waitForSelector(`#dlq-table tr[data-dead="${id}"]`, { state: "detached" });
    const job = (await api(rt, "GET", `/v1/jobs/${id}`, undefined, auth(ADMIN))).body;
    expect(job.status).toBe("succeeded");
    expect(job.attempt_log.map((a: { outcome: string }) => a.outcome)).toEqual(["permanent", "success"]);
    const audit = (await api(rt, "GET", "/v1/audit?limit=50", undefined, auth(ADMIN))).body;
    expect(JSON.stringify(audit)).toContain("target fixed (dashboard e2e)");
  });

  test("a replay the API refuses shows its message in the row", async () => {
    const created = await api(
      rt,
      "POST",
      "/v1/jobs",
      { tenant: "acme", target: { url: `${target.url}/gone`, method: "POST" }, retry: { max_attempts: 1 } },
      auth(ADMIN),
    );
    const id = created.body.id as string;
    await page.waitForSelector(`#dlq-table tr[data-dead="${id}"]`, { timeout: 10_000 });
    // The read-only token may look but not replay: the 403 is shown where the button was.
    await page.evaluate((t) => localStorage.setItem("scheduler.token", t), READER);
    await page.reload();
    await page.click(`#dlq-table tr[data-dead="${id}"] button.replay`);
    await page.fill(".replay-reason", "try");
    await page.click(".replay-confirm");
    const msg = await (await page.waitForSelector(".replay-error")).textContent();
    expect(msg).toContain("403");
    expect(msg).toContain("lacks the admin scope");
    expect((await api(rt, "GET", `/v1/jobs/${id}`, undefined, auth(ADMIN))).body.status).toBe("dead");
    // A tenant's token sees its tenant only, and no cluster-wide history.
    expect(await page.textContent("#backlog-chart")).toContain("token for all tenants");
  });

  test("a schedule's preview shows each fire instant with its UTC offset across a DST change", async () => {
    // From March 7 of the next year with a March ahead: eight daily noons cover the US
    // spring-forward (second Sunday of March, the 8th to the 14th).
    const now = new Date();
    const year = now.getUTCMonth() >= 2 ? now.getUTCFullYear() + 1 : now.getUTCFullYear();
    const r = await api(
      rt,
      "POST",
      "/v1/schedules",
      {
        id: "ny-noon",
        tenant: "acme",
        cron: "0 12 * * *",
        timezone: "America/New_York",
        start_at: `${year}-03-07T00:00:00Z`,
        target: { url: `${target.url}/noon` },
      },
      auth(ADMIN),
    );
    expect(r.status).toBe(201);
    await page.evaluate((t) => localStorage.setItem("scheduler.token", t), ADMIN);
    await page.reload();
    await page.click('#schedules-table tr[data-schedule="ny-noon"] button.preview');
    await page.waitForSelector(".preview-list li");
    const locals = await page.$$eval(".preview-list .local", (els) => els.map((e) => e.textContent));
    expect(locals).toHaveLength(8);
    expect(locals[0]).toBe(`${year}-03-07T12:00:00-05:00`);
    expect(locals.at(-1)).toBe(`${year}-03-14T12:00:00-04:00`);
    expect(locals.filter((l) => l!.endsWith("-05:00")).length).toBeGreaterThan(0);
    expect(locals.filter((l) => l!.endsWith("-04:00")).length).toBeGreaterThan(0);
  });

  test("takes a full-page screenshot with real data (kept as a test artifact)", async () => {
    // Enough samples for the backlog line and the outcome bars to show something.
    await page.waitForSelector("#backlog-chart svg polyline", { state: "attached" });
    await page.waitForSelector("#outcome-chart svg rect");
    mkdirSync("test-artifacts", { recursive: true });
    await page.screenshot({ path: ARTIFACT, fullPage: true });
    expect(statSync(ARTIFACT).size).toBeGreaterThan(20_000);
    expect(elsewhere).toEqual([]);
  });

  test("without SCHEDULER_TOKENS the page works with no token (loopback)", async () => {
    const open = await startScheduler(tdb.db, {}, { mode: "api" });
    origins.push(open.url!);
    try {
      await page.goto(`${open.url}/ui`);
      expect(await page.inputValue("#token")).toBe("");
      await page.waitForSelector("#jobs-table tr[data-job]");
      await page.waitForSelector('#schedules-table tr[data-schedule="ny-noon"]');
      expect(await page.isHidden("#auth-error")).toBe(true);
    } finally {
      await open.stop();
    }
  });

  test("a wrong token shows the 401 message", async () => {
    await page.goto(`${rt.url}/ui`);
    await page.fill("#token", "not-a-token");
    await page.click("#token-form button");
    await page.waitForSelector("#auth-error:visible");
    const text = await page.textContent("#auth-error");
    expect(text).toContain("401");
    expect(text).toContain("unknown bearer token");
  });
});
