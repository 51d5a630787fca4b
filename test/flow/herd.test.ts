// The 9:00:00 thundering herd against a real scheduler process (--mode=all) on a fresh
// PostgreSQL database, with a real loopback target: tens of thousands of jobs due at one
// instant. Shares the scenario with bench/herd.ts (bench/lib/herd.ts); see bench/README.md.
//
// Real durations on the 2-core reference VM: the 50k herd is created in 3–4.5 s through
// POST /v1/jobs/batch, is due 13 s after creation starts, and drains in 18–25 s
// (2–2.8k calls/s, PostgreSQL-bound): ~35 s for that test, which runs with
// SCHEDULER_LONG_TESTS=1; the default suite's herd is 10k jobs (see HERD). The rate-limited
// case drains in 5.9 s, ~11 s in all.
import { afterAll, describe, expect, test } from "bun:test";
import { defaultLeadMs, defaultScheduleLeadMs, type HerdFigures, mib, runHerd } from "../../bench/lib/herd.ts";
import { RecordingTarget } from "../../bench/lib/target.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";

const MiB = 2 ** 20;

/**
 * Peak RSS (VmHWM) of the scheduler through start, creation and drain of 50k jobs.
 * Measured: 175–218 MiB (100–140 MiB of it before the due instant: start + creating 50k
 * through the API; 126 MiB for a 5k herd). Memory follows the calls in flight
 * (WORKER_CONCURRENCY) and the claim batch, not the size of the herd. A scheduler that
 * claimed or called the herd all at once would hold 50k rows (~70 MiB in a Bun process,
 * measured) plus 50k requests in flight, well past this; an over-read of the rows alone
 * (~70 MiB) would not be caught.
 */
const PEAK_RSS_BOUND = 400 * MiB;

/**
 * Due instant → last first call for the 50k herd. Measured 19.6–25 s here (2.0–2.5k calls/s;
 * PostgreSQL takes ~1.2 of the 2 cores). The bound is ~2.5× the slowest run, for a shared
 * box. What it catches: with SCHEDULER_POLL_INTERVAL=1s (the default, set below), a
 * dispatcher that claimed only on its poll tick (≤ WORKER_CONCURRENCY per tick) would need
 * 250 s, and one that stopped waking itself after a full batch would too.
 */
const DRAIN_BOUND_S = 60;

/**
 * The default suite's herd: 10k jobs (drains in ~4-5 s here), SCHEDULER_LONG_TESTS=1 the
 * 50k one (~35 s, too long for every run). Both prove each job called exactly once and never
 * early. The drain bound keeps its teeth at 10k: a dispatcher that claimed only on its poll
 * tick would need 10k / 200 = 50 s. The memory bound is meaningful only for the long form
 * (10k rows held at once would be ~14 MiB, within the noise), so it is the long form's.
 */
const LONG = process.env.SCHEDULER_LONG_TESTS === "1";
const HERD = LONG ? { jobs: 50_000, drainS: DRAIN_BOUND_S } : { jobs: 10_000, drainS: 40 };

/** The first call of the herd after the due instant: measured 70–115 ms. */
const FIRST_CALL_BOUND_MS = 1000;

interface Run {
  url: string;
  proc: Proc;
  target: RecordingTarget;
}

const runs: Run[] = [];

async function startRun(env: Record<string, string>, keyHeader?: string): Promise<Run> {
  const url = await createDatabase();
  const target = new RecordingTarget(keyHeader);
  // LOG_LEVEL=warn: at info the scheduler writes a line per delivery, 50k lines through the pipe.
  const proc = await spawnScheduler(
    ["--mode=all"],
    {
      DATABASE_URL: url,
      WORKER_CONCURRENCY: "200",
      LOG_LEVEL: "warn",
      SCHEDULER_POLL_INTERVAL: "1s",
      ...env,
    },
    { waitReady: false },
  );
  const run = { url, proc, target };
  runs.push(run);
  const end = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${proc.url}/readyz`).catch(() => undefined);
    if (res?.ok) break;
    if (Date.now() > end) throw new Error(`scheduler not ready in 30 s; stderr: ${proc.stderr().slice(-500)}`);
    await Bun.sleep(100);
  }
  return run;
}

async function endRun(r: Run): Promise<{ exit: number; statuses: Record<string, number>; attempts: number; successes: number }> {
  kill(r.proc, "SIGTERM");
  const exit = await r.proc.exited;
  const db = openPostgres({ url: r.url, maxConnections: 1 });
  try {
    const rows = await db.query<{ status: string; n: number }>("SELECT status, count(*)::int AS n FROM jobs GROUP BY status");
    const [a] = await db.query<{ n: number; ok: number }>("SELECT count(*)::int AS n, count(*) FILTER (WHERE outcome = 'success')::int AS ok FROM attempts");
    return { exit, statuses: Object.fromEntries(rows.map((x) => [x.status, Number(x.n)])), attempts: Number(a.n), successes: Number(a.ok) };
  } finally {
    await db.close();
  }
}

function herdOf(r: Run, jobs: number, schedules?: "skip"): Promise<HerdFigures> {
  const p = r.proc;
  return runHerd({
    sched: {
      url: p.url,
      pid: p.proc.pid,
      assertAlive: () => {
        if (p.proc.exitCode !== null) throw new Error(`the scheduler exited with code ${p.proc.exitCode}; stderr: ${p.stderr().slice(-500)}`);
      },
    },
    target: r.target,
    settings: schedules
      ? // Schedules are created one request each, serially per tenant (bench/README part 24): in
        // a full suite on the slow 2-core VM 1,000 took over the bench's 5.5 s (2026-12-07), and
        // the herd then fired tomorrow. So it is due 3 s + 12 ms a schedule after creation starts.
        { jobs, leadMs: Math.max(defaultScheduleLeadMs(jobs), 3000 + 12 * jobs), timeoutMs: 80_000, settleMs: 1000, batch: 1000, postConcurrency: 8, schedules }
      : { jobs, leadMs: defaultLeadMs(jobs), timeoutMs: 80_000, settleMs: 1000, batch: 1000, postConcurrency: 2 },
    phase: 0,
    tag: `herd-${jobs}`,
  });
}

/** Every job called exactly once, never before its due instant, by both clocks' accounts. */
function expectExactlyOnceNeverEarly(f: HerdFigures, t: RecordingTarget, jobs: number): void {
  expect(f.createdLate).toBe(0); // every job existed before the instant
  expect(f.slackMs).toBeGreaterThan(0);
  expect(f.timedOut).toBe(false);
  expect(t.arrivals.size).toBe(jobs);
  expect(f.delivered).toBe(jobs);
  expect(f.missing).toBe(0);
  expect(f.duplicates).toBe(0);
  expect(t.unexpected).toBe(0);
  expect(t.withoutId).toBe(0);
  // No call before the job's due_at as the API returned it ...
  expect(f.early).toBe(0);
  // ... nor before the Scheduler-Scheduled-For header the call itself carried, which is that due_at.
  expect(f.earlyByHeader).toBe(0);
  expect(f.headerMismatch).toBe(0);
  expect(f.lagMs!.min).toBeGreaterThanOrEqual(0);
}

afterAll(async () => {
  for (const r of runs) {
    kill(r.proc);
    await r.proc.exited;
    r.target.stop();
    await dropDatabase(r.url);
  }
});

describe("the 9:00:00 thundering herd (postgres, real scheduler process)", () => {
  test(`${HERD.jobs.toLocaleString("en-US")} jobs due at one instant: each called exactly once, none early, drained in bounded time${LONG ? " and memory" : ""}`, async () => {
    const N = HERD.jobs;
    const r = await startRun({});
    const f = await herdOf(r, N);
    const after = await endRun(r);
    console.log(
      `herd ${N}: created in ${f.createSeconds.toFixed(2)} s (${(f.slackMs / 1000).toFixed(1)} s before the instant), ` +
        `first call +${f.lagMs?.min} ms, drained in ${f.drainSeconds?.toFixed(2)} s (${f.deliveriesPerSecond?.toFixed(0)}/s), ` +
        `lag p50 ${f.lagMs?.p50} p99 ${f.lagMs?.p99} max ${f.lagMs?.max} ms, peak RSS ${f.peakRss === null ? "?" : mib(f.peakRss)} MiB ` +
        `(${f.peakRssBeforeDue === null ? "?" : mib(f.peakRssBeforeDue)} before the instant)`,
    );
    expectExactlyOnceNeverEarly(f, r.target, N);
    expect(f.lagMs!.min).toBeLessThan(FIRST_CALL_BOUND_MS);
    expect(f.drainSeconds!).toBeLessThan(HERD.drainS);
    expect(f.peakRss).not.toBeNull(); // Linux: /proc is there
    if (LONG) expect(f.peakRss!).toBeLessThan(PEAK_RSS_BOUND);
    // The database agrees: one terminal state per job, one attempt per job.
    expect(after.statuses).toEqual({ succeeded: N });
    expect(after.attempts).toBe(N);
    expect(after.successes).toBe(N);
    expect(after.exit).toBe(0);
  }, 150_000);

  // The product's own herd: schedules ("every weekday at 09:00") whose occurrences fall due
  // together, each made by the generator only at its instant. Keyed by the Idempotency-Key
  // the occurrence's call carries (`<schedule id>@<nominal time>`), known before its job is.
  test("1,000 schedules whose occurrences are due at one instant: each called exactly once, none early", async () => {
    const N = 1000;
    const r = await startRun({ SCHEDULER_TENANT_MAX_SCHEDULES: String(2 * N) }, "idempotency-key");
    const f = await herdOf(r, N, "skip");
    const after = await endRun(r);
    console.log(
      `schedule herd ${N}: created in ${f.createSeconds.toFixed(2)} s (${(f.slackMs / 1000).toFixed(1)} s before the instant), ` +
        `first call +${f.lagMs?.min} ms, drained in ${f.drainSeconds?.toFixed(2)} s, lag p50 ${f.lagMs?.p50} p99 ${f.lagMs?.p99} ms`,
    );
    expectExactlyOnceNeverEarly(f, r.target, N);
    expect(f.lagMs!.min).toBeLessThan(FIRST_CALL_BOUND_MS);
    // Measured ~0.3 s. One generation pass of 100 per poll interval (1 s) would need 10 s.
    expect(f.drainSeconds!).toBeLessThan(8);
    expect(after.statuses).toEqual({ succeeded: N });
    expect(after.attempts).toBe(N);
    expect(after.exit).toBe(0);
  }, 60_000);

  // 200/s rather than 500/s: on a loaded 2-core box the unlimited scheduler itself went as low
  // as ~700 calls/s, too close to 500/s for "the limiter sets the pace" to be what is measured.
  test("SCHEDULER_DISPATCH_RATE=200: a 1,200-job herd drains at that rate, no 1-second window above it plus a small burst", async () => {
    const N = 1200;
    const RATE = 200;
    const r = await startRun({ SCHEDULER_DISPATCH_RATE: String(RATE) });
    const f = await herdOf(r, N);
    const after = await endRun(r);
    console.log(
      `herd ${N} at ${RATE}/s: drained in ${f.drainSeconds?.toFixed(2)} s, most calls in any 1 s window ${f.maxPerSecond}, ` +
        `per second after the instant: ${f.perSecond.join(" ")}`,
    );
    expectExactlyOnceNeverEarly(f, r.target, N);
    // The rate bucket holds a tenth of a second of tokens, so a window holds at most
    // 1.1 × RATE claims; 15 % more for calls claimed in one window arriving in the next: a
    // worker checks and calls its jobs in batches, so a call can trail its claim by one
    // pre-call check (seen: 236 calls in a window at 200/s, every second of claims at 195–204;
    // 251 once with the machine three times overloaded). Unlimited, the same herd goes at
    // ~2,000/s; a bucket holding a second of tokens would allow 400 in a window.
    expect(f.maxPerSecond).toBeLessThanOrEqual(Math.ceil(RATE * 1.3));
    // The burst bucket starts full (RATE / 10 tokens): the rest goes at RATE per second, so
    // the drain takes at least (N − RATE/10) / RATE = 5.9 s, i.e. N / RATE less 0.1 s.
    expect(f.drainSeconds!).toBeGreaterThanOrEqual((N - RATE / 10) / RATE);
    // ... and not much longer: the limiter, not the scheduler, sets the pace (~2k/s unlimited
    // here); a limiter at half the rate would take 12 s.
    expect(f.drainSeconds!).toBeLessThan(N / RATE + 3);
    expect(after.statuses).toEqual({ succeeded: N });
    expect(after.attempts).toBe(N);
    expect(after.exit).toBe(0);
  }, 60_000);
});
