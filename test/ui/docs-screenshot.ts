// Makes docs/dashboard.png and docs/dashboard-job.png, the README's pictures of the dashboard
// and of one job's page, from a realistic state:
// a few tenants sending bursts of jobs to targets that answer fast, slow, throttled, failing
// or broken, two schedules, and a couple of dead jobs. Not a test; run it by hand when the
// dashboard's look changes (about a minute):
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bun test/ui/docs-screenshot.ts
import { tok } from "../helpers/tokens.ts";
import { chromium } from "playwright-core";
import { freshDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { Target } from "../helpers/target.ts";

const OUT = process.argv[2] ?? "docs/dashboard.png";
const OUT_JOB = process.argv[3] ?? "docs/dashboard-job.png";
const TOKEN = tok("tokAdmin");
const auth = { authorization: `Bearer ${TOKEN}` };
const TENANTS = ["acme", "globex", "initech", "umbrella"];

const tdb = await freshDb("postgres");
const rt = await startScheduler(tdb.db, {
  SCHEDULER_TOKENS: `${TOKEN}:*:admin`,
  SCHEDULER_STATS_INTERVAL: "1s",
  WORKER_CONCURRENCY: "40",
});
let calls = 0;
const target = new Target(async (r, n) => {
  calls++;
  // Outlasts its 1 s timeout once (possibly delivered), then throttled once, then fine.
  if (r.path === "/invoices/sync") {
    if (n === 1) await Bun.sleep(2500);
    if (n === 2) return new Response("busy", { status: 503, headers: { "retry-after": "1" } });
    return new Response("ok");
  }
  if (r.path === "/broken") return new Response("no such invoice", { status: 404 });
  if (r.path === "/busy" && calls % 40 === 0) return new Response("slow down", { status: 429, headers: { "retry-after": "1" } });
  if (r.path === "/flaky" && calls % 9 === 0) return new Response("oops", { status: 502 });
  await Bun.sleep(r.path === "/slow" ? 300 + Math.random() * 900 : 20 + Math.random() * 120);
  return new Response("ok");
});

const job = (tenant: string, path: string, extra: Record<string, unknown> = {}) => ({
  tenant,
  target: { url: `${target.url}${path}`, body: { tenant } },
  ...extra,
});

try {
  const nextYear = new Date().getUTCFullYear() + 1;
  await api(
    rt,
    "POST",
    "/v1/schedules",
    {
      id: "nightly-report",
      tenant: "acme",
      cron: "30 2 * * *",
      timezone: "America/New_York",
      start_at: `${nextYear}-03-10T00:00:00Z`,
      target: { url: `${target.url}/ok` },
    },
    auth,
  );
  await api(
    rt,
    "POST",
    "/v1/schedules",
    { id: "invoice-sweep", tenant: "globex", cron: "*/15 * * * *", timezone: "Europe/Amsterdam", target: { url: `${target.url}/ok` } },
    auth,
  );
  await api(rt, "POST", "/v1/jobs", job("initech", "/broken", { idempotency_key: "invoice-7731" }), auth);
  await api(rt, "POST", "/v1/jobs", job("umbrella", "/broken", { retry: { max_attempts: 1 } }), auth);
  const shown = await api(
    rt,
    "POST",
    "/v1/jobs",
    job("acme", "/invoices/sync", { idempotency_key: "sync-2041", timeout: "1s", retry: { max_attempts: 5, base: "500ms" } }),
    auth,
  );

  // Bursts: some due now, some a few seconds out, so backlog and queue depth move.
  for (let round = 0; round < 30; round++) {
    const jobs = TENANTS.flatMap((t, i) =>
      Array.from({ length: 3 + ((round * (i + 3)) % 9) }, (_, k) => {
        const path = ["/ok", "/slow", "/busy", "/flaky"][(k + i + round) % 4];
        return job(t, path, { delay: `${(k % 5) * 700}ms`, retry: { max_attempts: 3, base: "500ms" } });
      }),
    );
    const r = await api(rt, "POST", "/v1/jobs/batch", { jobs }, auth);
    if (r.status !== 200) throw new Error(`batch: ${r.status} ${JSON.stringify(r.body)}`);
    await Bun.sleep(round % 10 < 6 ? 900 : 2000);
  }
  // Let most of the last burst finish, so the recent jobs show outcomes, not only waiting jobs.
  await Bun.sleep(2500);

  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(`${rt.url}/ui`);
  await page.fill("#token", TOKEN);
  await page.click("#token-form button");
  await page.waitForSelector("#backlog-chart svg polyline", { state: "attached" });
  await page.click('#schedules-table tr[data-schedule="nightly-report"] button.preview');
  await page.waitForSelector(".preview-list li");
  await page.fill("#create-url", "https://hooks.example.com/billing/retry");
  await page.screenshot({ path: OUT, fullPage: true });
  await page.goto(`${rt.url}/ui#/jobs/${shown.body.id}`);
  await page.waitForSelector('#attempts-table tr[data-outcome="success"]');
  await page.screenshot({ path: OUT_JOB, fullPage: true });
  await browser.close();
  console.log(`wrote ${OUT} and ${OUT_JOB}`);
} finally {
  target.stop();
  await rt.stop();
  await tdb.close();
}
