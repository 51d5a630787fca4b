import { describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type DriverName, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";

// Per-target-host limits in the worker, end to end: real databases, real loopback targets
// (each on its own port, so each is its own host), the scheduler in this process.

/** A fresh database and a scheduler on it with `env`; torn down after `fn`. */
async function withScheduler(driver: DriverName, env: Record<string, string>, fn: (rt: Runtime, t: TestDb) => Promise<void>) {
  const t = await freshDb(driver);
  const rt = await startScheduler(t.db, env);
  try {
    await fn(rt, t);
  } finally {
    await rt.stop();
    await t.close();
  }
}

async function createBatch(rt: Runtime, jobs: Record<string, unknown>[]) {
  const r = await api(rt, "POST", "/v1/jobs/batch", { jobs });
  expect(r.status).toBe(200);
  for (const j of r.body.jobs) if (!j.id) throw new Error(`not created: ${JSON.stringify(j)}`);
  return r.body.jobs as any[];
}

async function countStatus(t: TestDb, status: string, urlPrefix: string): Promise<number> {
  const rows = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = $1 AND target->>'url' LIKE $2", [status, `${urlPrefix}%`]);
  return rows[0]!.n;
}

/** Calls that arrived in [from, to) ms after t0. */
const between = (calls: Received[], t0: number, from: number, to: number) => calls.filter((c) => c.at >= t0 + from && c.at < t0 + to).length;

/** The most calls in any window of `ms`. */
function peakIn(calls: Received[], ms: number): number {
  const at = calls.map((c) => c.at).sort((a, b) => a - b);
  let peak = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i]! - at[j]! >= ms) j++;
    peak = Math.max(peak, i - j + 1);
  }
  return peak;
}

/** Counts requests in flight at the target, and the most seen at once. */
class InFlightCounter {
  now = 0;
  max = 0;
  enter(): void {
    this.now++;
    this.max = Math.max(this.max, this.now);
  }
  leave(): void {
    this.now--;
  }
}

const sleepUntil = (t: number) => Bun.sleep(Math.max(0, t - Date.now()));

// The limiter lives in the worker, not in the store: these timing-heavy cases run on
// Postgres; the store paths they use (DeferJobs, StartAttempts) run on both drivers in
// delivery.test.ts. SCHEDULER_LONG_TESTS=1 runs them on PGlite too.
const HOST_LIMIT_DRIVERS: DriverName[] = process.env.SCHEDULER_LONG_TESTS === "1" ? DRIVERS : ["postgres"];

for (const driver of HOST_LIMIT_DRIVERS) {
  describe(`per-host limits (${driver})`, () => {
    test("a host answering 429 is slowed while another host keeps its rate; when it answers 200 again its rate climbs back", async () => {
      let throttling = false;
      const a = new Target(() => (throttling ? new Response("slow down", { status: 429 }) : new Response("ok")));
      const b = new Target();
      try {
        await withScheduler(driver, { SCHEDULER_HOST_RATE: "20" }, async (rt) => {
          const retry = { max_attempts: 3, base: "50ms", max: "200ms" };
          const jobs = (url: string) => Array.from({ length: 200 }, (_, i) => ({ target: { url: `${url}/j${i}` }, retry }));
          await createBatch(rt, [...jobs(a.url), ...jobs(b.url)]);
          // The windows count from the first call: creating 400 jobs and the first claim take a
          // varying while on a busy machine (four test files at once: 10 calls in the first
          // window when it counted from before the create).
          await eventually(() => a.calls.length > 0 && b.calls.length > 0, 10_000, "the first calls to both hosts");
          const t0 = Math.min(a.calls[0]!.at, b.calls[0]!.at);
          await sleepUntil(t0 + 1200);
          throttling = true;
          await sleepUntil(t0 + 2800);
          const metrics = await (await fetch(`${rt.url}/metrics`)).text();
          await sleepUntil(t0 + 3200);
          throttling = false;
          await sleepUntil(t0 + 7500);

          // Before: both at their limit, 20/s.
          expect(between(a.calls, t0, 300, 1200)).toBeGreaterThanOrEqual(12);
          expect(between(b.calls, t0, 300, 1200)).toBeGreaterThanOrEqual(12);
          // Throttled: A's rate halves with each 429 down to the floor (0.5/s) …
          const aSlowed = between(a.calls, t0, 2200, 3200);
          expect(aSlowed).toBeLessThanOrEqual(4);
          // … while B, called in parallel, keeps its 20/s. At least half of it: a B held back
          // with A would run at A's rate (≤ 4); on a starved CPU (four test files at once) B
          // itself was seen at 11.
          expect(between(b.calls, t0, 2200, 3200)).toBeGreaterThanOrEqual(10);
          // Recovered: successes raise A's rate back, step by step, not above its limit.
          const aBack = between(a.calls, t0, 5500, 7500);
          expect(aBack).toBeGreaterThanOrEqual(8);
          expect(aBack).toBeGreaterThan(2 * aSlowed);
          expect(peakIn(a.calls, 1000)).toBeLessThanOrEqual(22);
          expect(peakIn(b.calls, 1000)).toBeLessThanOrEqual(22);
          // Throttled answers did not use up max_attempts: no job is dead.
          expect(a.calls.filter((c) => c.at >= t0 + 1200 && c.at < t0 + 3200).length).toBeGreaterThan(0);

          expect(metrics).toMatch(/^scheduler_throttled_hosts 1$/m);
          expect(metrics).toMatch(/^scheduler_host_deferrals_total [1-9]\d*$/m);
          expect(metrics).not.toContain("127.0.0.1");
        });
      } finally {
        a.stop();
        b.stop();
      }
    }, 30_000);

    test("SCHEDULER_HOST_CONCURRENCY=2: never more than 2 calls in flight to one host, while other hosts get their own (and an override more)", async () => {
      const all = new InFlightCounter();
      const slow = (counter: InFlightCounter) =>
        new Target(async () => {
          counter.enter();
          all.enter();
          await Bun.sleep(250);
          counter.leave();
          all.leave();
          return new Response("ok");
        });
      const [ca, cc, cb] = [new InFlightCounter(), new InFlightCounter(), new InFlightCounter()];
      const [a, c, b] = [slow(ca), slow(cc), slow(cb)];
      try {
        await withScheduler(driver, { SCHEDULER_HOST_CONCURRENCY: "2" }, async (rt, t) => {
          const jobs = (url: string, n: number, extra: Record<string, unknown> = {}) =>
            Array.from({ length: n }, (_, i) => ({ target: { url: `${url}/j${i}` }, ...extra }));
          await createBatch(rt, [...jobs(a.url, 8), ...jobs(c.url, 8), ...jobs(b.url, 12, { host_limits: { concurrency: 6 } })]);
          await eventually(async () => (await countStatus(t, "succeeded", "http://127.0.0.1")) === 28, 15_000, "28 jobs succeeded");
          expect(a.calls).toHaveLength(8);
          expect(ca.max).toBe(2);
          expect(cc.max).toBe(2);
          // The per-job override beats the setting.
          expect(cb.max).toBeGreaterThan(2);
          expect(cb.max).toBeLessThanOrEqual(6);
          expect(all.max).toBeGreaterThanOrEqual(6);
          // Waiting for room is not an attempt.
          const attempts = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts");
          expect(attempts[0]!.n).toBe(28);
        });
      } finally {
        for (const x of [a, b, c]) x.stop();
      }
    }, 30_000);

    test("SCHEDULER_HOST_RATE=5: 20 jobs due at once to one host are spread over more than 3 s, none called before it is due", async () => {
      const target = new Target();
      try {
        await withScheduler(driver, { SCHEDULER_HOST_RATE: "5" }, async (rt, t) => {
          const runAt = new Date(Date.now() + 400).toISOString();
          const created = await createBatch(
            rt,
            Array.from({ length: 20 }, (_, i) => ({ target: { url: `${target.url}/r${i}` }, run_at: runAt })),
          );
          await eventually(async () => (await countStatus(t, "succeeded", target.url)) === 20, 15_000, "20 jobs succeeded");
          const due = new Map(created.map((j) => [j.id as string, Date.parse(j.due_at)]));
          const at = target.calls.map((c) => c.at).sort((x, y) => x - y);
          expect(at).toHaveLength(20);
          expect(at[19]! - at[0]!).toBeGreaterThanOrEqual(2900);
          expect(peakIn(target.calls, 1000)).toBeLessThanOrEqual(6);
          for (const c of target.calls) expect(c.at).toBeGreaterThanOrEqual(due.get(c.headers["webhook-id"]!)!);
          // Held back, not retried: one call, one attempt each, Scheduler-Scheduled-For unchanged.
          for (const c of target.calls) {
            expect(c.headers["scheduler-attempt"]).toBe("1");
            expect(Date.parse(c.headers["scheduler-scheduled-for"]!)).toBe(due.get(c.headers["webhook-id"]!)!);
          }
        });
      } finally {
        target.stop();
      }
    }, 30_000);

    test("a job's host_limits beat the setting, both ways", async () => {
      const fast = new Target();
      const slow = new Target();
      try {
        await withScheduler(driver, { SCHEDULER_HOST_RATE: "2" }, async (rt, t) => {
          await createBatch(rt, [
            ...Array.from({ length: 10 }, (_, i) => ({ target: { url: `${fast.url}/f${i}` }, host_limits: { rate: 50 } })),
            ...Array.from({ length: 4 }, (_, i) => ({ target: { url: `${slow.url}/s${i}` } })),
          ]);
          await eventually(async () => (await countStatus(t, "succeeded", "http://127.0.0.1")) === 14, 15_000, "14 jobs succeeded");
          const span = (x: Target) => Math.max(...x.calls.map((c) => c.at)) - Math.min(...x.calls.map((c) => c.at));
          // 10 calls at 50/s: ~180 ms; at the setting's 2/s they would take 4.5 s.
          expect(span(fast)).toBeLessThan(1500);
          expect(span(fast)).toBeGreaterThanOrEqual(150);
          // Without an override the setting applies: 4 calls at 2/s.
          expect(span(slow)).toBeGreaterThanOrEqual(1400);
        });
      } finally {
        fast.stop();
        slow.stop();
      }
    }, 30_000);

    test("a job throttled (429) 10 times with max_attempts 3 still succeeds when the host recovers; transient failures still count", async () => {
      const target = new Target((r, n) => {
        if (n <= 10) return new Response("busy", { status: 429 });
        if (r.path === "/recovers") return n <= 12 ? new Response("oops", { status: 500 }) : new Response("ok");
        return new Response("down", { status: 502 });
      });
      try {
        // A floor of 20/s keeps ten slowdowns short.
        await withScheduler(driver, { SCHEDULER_HOST_RATE_FLOOR: "20" }, async (rt) => {
          const retry = { max_attempts: 3, base: "10ms", max: "40ms" };
          const [ok, down] = await createBatch(rt, [
            { target: { url: `${target.url}/recovers` }, retry },
            { target: { url: `${target.url}/down` }, retry },
          ]);
          const settled = (id: string, status: string) =>
            eventually(
              async () => {
                const j = (await api(rt, "GET", `/v1/jobs/${id}`)).body;
                return j.status === status ? j : undefined;
              },
              15_000,
              `job ${id} ${status}`,
            );
          const done = await settled(ok.id, "succeeded");
          expect(done.attempts).toBe(13);
          expect(done.attempt_log.map((x: any) => x.outcome)).toEqual([...Array(10).fill("throttled"), "transient", "transient", "success"]);
          expect(target.callsTo("/recovers").map((c) => c.headers["scheduler-attempt"])).toEqual(Array.from({ length: 13 }, (_, i) => String(i + 1)));
          // The same ten 429s, then three transient failures: max_attempts (3) is used up by those.
          const dead = await settled(down.id, "dead");
          expect(dead.dead_reason).toBe("max_attempts");
          expect(dead.attempt_log.map((x: any) => x.outcome)).toEqual([...Array(10).fill("throttled"), "transient", "transient", "transient"]);
        });
      } finally {
        target.stop();
      }
    }, 30_000);

    test("throttled answers are bounded by 24 h from the first one when there is no expires_at: then dead, throttled_too_long", async () => {
      const target = new Target(() => new Response("busy", { status: 503, headers: { "retry-after": "1" } }));
      try {
        await withScheduler(driver, {}, async (rt, t) => {
          const [j] = await createBatch(rt, [{ target: { url: `${target.url}/always-busy` }, retry: { max_attempts: 1 } }]);
          const row = async () =>
            (
              await t.db.query<{ status: string; tries: number; throttle_until: Date | null }>("SELECT status, tries, throttle_until FROM jobs WHERE id = $1", [
                j.id,
              ])
            )[0]!;
          const first = await eventually(
            async () => {
              const r = await row();
              return r.status === "scheduled" && r.throttle_until ? r : undefined;
            },
            5000,
            "the first throttled answer recorded",
          );
          const firstCall = target.calls[0]!.at;
          expect(first.tries).toBe(0);
          expect(Math.abs(first.throttle_until!.getTime() - (firstCall + 24 * 3600_000))).toBeLessThan(5000);
          // As if those 24 h had passed (the retry is due in 1 s, after its Retry-After).
          await t.db.query("UPDATE jobs SET throttle_until = now() - interval '1 second' WHERE id = $1", [j.id]);
          const done = await eventually(
            async () => {
              const r = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
              return r.status === "dead" ? r : undefined;
            },
            5000,
            "dead",
          );
          expect(done.dead_reason).toBe("throttled_too_long");
          expect(done.attempt_log.map((a: any) => a.outcome)).toEqual(["throttled", "throttled"]);
        });
      } finally {
        target.stop();
      }
    }, 30_000);

    /**
     * A host paused for 3 s by a 429 (Retry-After: 3), then a job for it created when the pause
     * has less than the 2 s hold horizon left: it waits in memory, leased ("running"), for the
     * pause to end. `then` gets it with the time left before the pause ends.
     */
    async function heldForPausedHost(then: (o: { rt: Runtime; t: TestDb; id: string; firstId: string; msLeft: () => number }) => Promise<void>) {
      const target = new Target((r, n) =>
        r.path === "/first" && n === 1 ? new Response("busy", { status: 429, headers: { "retry-after": "3" } }) : new Response("ok"),
      );
      try {
        await withScheduler(driver, {}, async (rt, t) => {
          const [first] = await createBatch(rt, [{ target: { url: `${target.url}/first` } }]);
          await eventually(() => target.callsTo("/first").length === 1, 5000, "first call");
          const pausedAt = target.callsTo("/first")[0]!.at;
          // Waits count against what is left of the pause (a busy machine: four test files at
          // once once took over a second to end a cancel), not a fixed second.
          const msLeft = () => Math.max(50, pausedAt + 2900 - Date.now());
          await sleepUntil(pausedAt + 1200);
          const [held] = await createBatch(rt, [{ target: { url: `${target.url}/held` } }]);
          await eventually(async () => (await api(rt, "GET", `/v1/jobs/${held.id}`)).body.status === "running", msLeft(), "held");
          await then({ rt, t, id: held.id, firstId: first.id, msLeft });
          expect(target.callsTo("/held")).toHaveLength(0);
        });
      } finally {
        target.stop();
      }
    }

    test("a job waiting in memory for a paused host is not called: a cancel ends it at once", async () => {
      await heldForPausedHost(async ({ rt, id, msLeft }) => {
        const c = await api(rt, "POST", `/v1/jobs/${id}/cancel`, {});
        expect(c.status).toBe(202);
        const cancelled = await eventually(
          async () => {
            const j = (await api(rt, "GET", `/v1/jobs/${id}`)).body;
            return j.status === "cancelled" ? j : undefined;
          },
          msLeft(),
          "cancelled before the pause ends",
        );
        expect(cancelled.attempt_log).toHaveLength(0);
      });
    }, 30_000);

    test("a job waiting in memory for a paused host is not called: a graceful stop gives it back uncalled", async () => {
      await heldForPausedHost(async ({ rt, t, id, firstId, msLeft }) => {
        expect(msLeft()).toBeGreaterThan(50);
        await rt.stop();
        const row = (await t.db.query<{ status: string; calls: number }>("SELECT status, calls FROM jobs WHERE id = $1", [id]))[0]!;
        expect(row).toEqual({ status: "scheduled", calls: 0 });
        // The throttled one was deferred, not dropped: back to scheduled too.
        const f = (await t.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [firstId]))[0]!;
        expect(f.status).toBe("scheduled");
      });
    }, 30_000);
  });
}
