/**
 * GET /v1/stats (what the dashboard and `scheduler status` read) after real jobs, its tenant
 * scoping and history, and the `scheduler status` screen against a running scheduler.
 */
import { tok, tokenSpec } from "../helpers/tokens.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");
const TOKENS = tokenSpec("tokAll:*:admin;tokA:acme:jobs:read,jobs:write;tokB:beta:jobs:read,jobs:write");
const auth = (t: string) => ({ authorization: `Bearer ${tok(t)}` });

describe("stats and status (postgres)", () => {
  let t: TestDb;
  let rt: Runtime;
  const target = new Target((r) => (r.path.startsWith("/ok") ? new Response("ok") : new Response("gone", { status: 404 })));

  beforeAll(async () => {
    t = await freshDb("postgres");
    rt = await startScheduler(t.db, { SCHEDULER_TOKENS: TOKENS, SCHEDULER_STATS_INTERVAL: "200ms" });
    const mk = (tenant: string, path: string) => ({ tenant, target: { url: `${target.url}${path}` }, retry: { max_attempts: 1 } });
    const res = await api(
      rt,
      "POST",
      "/v1/jobs/batch",
      { jobs: [mk("acme", "/ok/1"), mk("acme", "/ok/2"), mk("acme", "/bad"), mk("beta", "/ok/3")] },
      auth("tokAll"),
    );
    expect(res.status).toBe(200);
    await api(rt, "POST", "/v1/jobs", { tenant: "beta", delay: "1h", target: { url: `${target.url}/later` } }, auth("tokAll"));
    await eventually(
      async () => {
        const [r] = await t.db.query<{ n: string | number }>("SELECT count(*) AS n FROM jobs WHERE status IN ('succeeded','dead')");
        return Number(r!.n) === 4;
      },
      10_000,
      "four jobs to end",
    );
  });
  afterAll(async () => {
    await rt?.stop();
    await t?.close();
    target.stop();
  });

  test("all tenants: counts, recent outcomes, start lag and its histogram, cluster, history", async () => {
    const r = await api(rt, "GET", "/v1/stats", undefined, auth("tokAll"));
    expect(r.status).toBe(200);
    const s = r.body;
    expect(s.tenant).toBeNull();
    expect(s.jobs).toMatchObject({ succeeded: 3, dead: 1, scheduled: 1, running: 0 });
    expect(s.dlq.jobs).toBe(1);
    expect(s.recent.by_outcome).toEqual({ success: 3, permanent: 1 });
    expect(s.recent.start_lag.count).toBe(4);
    expect(s.recent.start_lag.p50).toBeGreaterThanOrEqual(0);
    expect(s.recent.start_lag.max).toBeLessThan(10);
    expect(s.recent.lag_histogram.reduce((a: number, b: { count: number }) => a + b.count, 0)).toBe(4);
    expect(s.recent.lag_histogram.at(-1).le).toBeNull();
    expect(s.cluster).toMatchObject({ role: "home", region: "local" });
    expect(s.due_backlog).toBe(0);
    // The sampler runs every 200 ms: the newest sample may predate the jobs' end by that much.
    const h = await eventually(
      async () => {
        const hist = (await api(rt, "GET", "/v1/stats", undefined, auth("tokAll"))).body.history;
        return hist.length >= 2 && hist.at(-1).dead === 1 ? hist : undefined;
      },
      3000,
      "history samples after the jobs ended",
    );
    expect(h.at(-1)).toMatchObject({ due_backlog: 0, queue_depth: 0, dead: 1 });
  });

  test("a tenant's token sees its own figures only, and no cluster-wide history", async () => {
    const a = (await api(rt, "GET", "/v1/stats", undefined, auth("tokA"))).body;
    expect(a.tenant).toBe("acme");
    expect(a.jobs).toMatchObject({ succeeded: 2, dead: 1, scheduled: 0 });
    expect(a.recent.by_outcome).toEqual({ success: 2, permanent: 1 });
    expect(a.history).toEqual([]);
    expect(a.tenants_due_backlog).toEqual([]);
    const b = (await api(rt, "GET", "/v1/stats", undefined, auth("tokB"))).body;
    expect(b.jobs).toMatchObject({ succeeded: 1, dead: 0, scheduled: 1 });
    expect((await api(rt, "GET", "/v1/stats")).status).toBe(401);
    expect((await api(rt, "GET", "/v1/stats?window=5", undefined, auth("tokA"))).status).toBe(400);
  });

  test("scheduler status: one screen, a warning for the dead job (exit 1), one line when unreachable", async () => {
    // Not spawnSync: the scheduler it talks to runs in this test's own event loop.
    const run = async (args: string[], env: Record<string, string>) => {
      const p = Bun.spawn([process.execPath, MAIN, "status", ...args], {
        env: { PATH: process.env.PATH ?? "", ...env },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      return { code, out, err };
    };
    const r = await run([`--url=${rt.url}`], { SCHEDULER_TOKEN: tok("tokAll") });
    expect(r.err).toBe("");
    expect(r.code).toBe(1);
    expect(r.out).toContain("region     local (home)");
    expect(r.out).toMatch(/jobs\s+scheduled 1\s+queued 0\s+running 0\s+succeeded 3\s+dead 1/);
    expect(r.out).toMatch(/success 3\s+permanent 1/);
    expect(r.out).toContain("WARN 1 dead job(s)");
    const json = await run([`--url=${rt.url}`, "--json"], { SCHEDULER_TOKEN: tok("tokAll") });
    expect(JSON.parse(json.out).jobs.succeeded).toBe(3);
    const denied = await run([`--url=${rt.url}`], {});
    expect(denied.code).toBe(2);
    expect(denied.err.trim().split("\n")).toHaveLength(1);
    expect(denied.err).toContain("SCHEDULER_TOKEN");
    const away = await run(["--url=http://127.0.0.1:9"], {});
    expect(away.code).toBe(2);
    expect(away.err).toContain("cannot reach the scheduler");
    expect(away.err.trim().split("\n")).toHaveLength(1);
  }, 30_000);
});
