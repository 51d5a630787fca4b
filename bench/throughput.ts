#!/usr/bin/env bun
/**
 * Throughput and lag of webhook delivery, end to end, against a scheduler in its own process.
 *
 *   npm run bench                      # 5000 jobs per phase, throwaway PostgreSQL
 *   npm run bench -- --jobs 20000 --json out.json
 *
 * Phase "burst": N jobs all due at one instant. Phase "spread": N jobs due evenly over S
 * seconds. For each: how fast the backlog drains, how late calls arrive after due_at, and
 * whether any job was missed, called twice or called early. See bench/README.md.
 */
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Db } from "../src/store/db.ts";
import { openPglite } from "../src/store/pglite-driver.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { parseBenchArgs, UsageError, USAGE, type BenchArgs } from "./lib/args.ts";
import { createJobs, type Created } from "./lib/create-jobs.ts";
import { describeMachine, machineCpuSeconds, packageVersion, type Machine } from "./lib/machine.ts";
import { passedThrough, SchedulerProcess } from "./lib/scheduler-process.ts";
import { cpuTable, keyValues, phaseFigures, resultsTable, type CpuShare, type PhaseFigures } from "./lib/stats.ts";
import { RecordingTarget } from "./lib/target.ts";
import { benchHarness } from "./lib/harness.ts";
import { describeServer, environmentRows, type ServerInfo } from "./lib/server.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);

interface CpuSample {
  t: number;
  scheduler?: number;
  bench: number;
  machine?: { busy: number; total: number };
}

function sampleCpu(s: SchedulerProcess): CpuSample {
  const u = process.cpuUsage();
  return { t: performance.now(), scheduler: s.cpuSeconds(), bench: (u.user + u.system) / 1e6, machine: machineCpuSeconds() };
}

function cpuShare(a: CpuSample, b: CpuSample): CpuShare {
  const dt = (b.t - a.t) / 1000;
  if (dt <= 0) return { scheduler: null, bench: null, other: null, machineBusy: null };
  const scheduler = a.scheduler !== undefined && b.scheduler !== undefined ? ((b.scheduler - a.scheduler) / dt) * 100 : null;
  const bench = ((b.bench - a.bench) / dt) * 100;
  let other: number | null = null;
  let machineBusy: number | null = null;
  if (a.machine && b.machine && b.machine.total > a.machine.total) {
    const busy = b.machine.busy - a.machine.busy;
    machineBusy = (busy / (b.machine.total - a.machine.total)) * 100;
    if (scheduler !== null) other = Math.max(0, (busy / dt) * 100 - scheduler - bench);
  }
  return { scheduler, bench, other, machineBusy };
}

/** Waits until every job of the phase was called once (or the timeout), printing progress. */
async function waitForPhase(p: {
  name: string;
  phase: number;
  created: Created;
  args: BenchArgs;
  sched: SchedulerProcess;
  target: RecordingTarget;
}): Promise<CpuShare> {
  const n = p.created.due.size;
  let firstDue = Infinity;
  let lastDue = -Infinity;
  for (const at of p.created.due.values()) {
    if (at < firstDue) firstDue = at;
    if (at > lastDue) lastDue = at;
  }
  while (Date.now() < firstDue) {
    p.sched.assertAlive();
    await Bun.sleep(Math.min(50, Math.max(1, firstDue - Date.now())));
  }
  const start = sampleCpu(p.sched);
  const deadline = firstDue + p.args.timeoutMs;
  let lastPrint = Date.now();
  let lastCount = 0;
  while (p.target.delivered(p.phase) < n) {
    p.sched.assertAlive();
    const now = Date.now();
    if (now > deadline) {
      say(`${p.name}: timed out after ${p.args.timeoutMs / 1000} s with ${p.target.delivered(p.phase)}/${n} delivered`);
      break;
    }
    if (now - lastPrint >= 1000) {
      const count = p.target.delivered(p.phase);
      const pending = now < lastDue ? `, ${((lastDue - now) / 1000).toFixed(1)} s of due times to go` : "";
      say(`${p.name}: ${count}/${n} delivered (+${Math.round(((count - lastCount) * 1000) / (now - lastPrint))}/s${pending})`);
      lastPrint = now;
      lastCount = count;
    }
    await Bun.sleep(10);
  }
  const end = sampleCpu(p.sched);
  say(`${p.name}: ${p.target.delivered(p.phase)}/${n} delivered; listening ${p.args.settleMs} ms more for repeated calls`);
  await Bun.sleep(p.args.settleMs);
  return cpuShare(start, end);
}

async function runPhase(p: {
  name: string;
  phase: number;
  dueTimes: () => number[];
  args: BenchArgs;
  sched: SchedulerProcess;
  target: RecordingTarget;
}): Promise<PhaseFigures> {
  const dueTimes = p.dueTimes();
  say(`${p.name}: creating ${dueTimes.length} jobs`);
  const created = await createJobs({
    schedulerUrl: p.sched.url,
    targetUrl: p.target.url,
    dueTimes,
    batch: p.args.batch,
    parallel: p.args.postConcurrency,
    tag: p.name,
  });
  p.target.expect(p.phase, created.due.keys());
  const createSeconds = (created.endedAt - created.startedAt) / 1000;
  const firstDue = dueTimes.reduce((a, b) => Math.min(a, b));
  say(
    `${p.name}: created in ${createSeconds.toFixed(2)} s (${Math.round(dueTimes.length / createSeconds)} jobs/s), ${((firstDue - created.endedAt) / 1000).toFixed(2)} s before the first due time`,
  );
  if (created.createdLate > 0) {
    say(`${p.name}: WARNING ${created.createdLate} jobs were due before their creation finished; their lag includes creation time (raise --lead or --gap)`);
  }
  const cpu = await waitForPhase({ ...p, created });
  return phaseFigures({ phase: p.name, due: created.due, arrivals: p.target.arrivals, createdLate: created.createdLate, createSeconds, cpu });
}

interface DbCheck {
  version: string;
  /** The server and its settings; undefined on PGlite. */
  server?: ServerInfo;
  statuses: Record<string, number>;
  attempts: number;
}

async function inspectDb(db: Db, postgres: boolean): Promise<DbCheck> {
  try {
    const [{ version }] = await db.query<{ version: string }>("SELECT version() AS version");
    const server = postgres ? await describeServer((q) => db.query(q)) : undefined;
    const rows = await db.query<{ status: string; n: number }>("SELECT status, count(*)::int AS n FROM jobs GROUP BY status ORDER BY status");
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts");
    return { version, server, statuses: Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])), attempts: Number(n) };
  } finally {
    await db.close();
  }
}

async function main(): Promise<number> {
  let args: BenchArgs | undefined;
  try {
    args = parseBenchArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      say(`bench: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!args) return 0;

  const logFile = args.schedulerLog ?? join(tmpdir(), `scheduler-bench-${process.pid}.log`);
  writeFileSync(logFile, "");
  let sched: SchedulerProcess | undefined;
  let target: RecordingTarget | undefined;
  const h = benchHarness(say);
  h.onCleanup(async () => {
    sched?.kill();
    await sched?.proc.exited;
    target?.stop();
  });

  try {
    const { dbUrl, dataDir, label: dbLabel } = await h.database("bench");
    say(`bench: database: ${dbLabel}`);
    say(`bench: scheduler output: ${logFile}`);
    target = new RecordingTarget();
    sched = await SchedulerProcess.start({ databaseUrl: dbUrl, dataDir, concurrency: args.concurrency, logLevel: args.logLevel, logFile });
    await sched.waitReady();
    say(`bench: scheduler ready at ${sched.url} (pid ${sched.proc.pid}), target at ${target.url}`);

    const N = args.jobs;
    const a = args;
    const phases: PhaseFigures[] = [];
    phases.push(
      await runPhase({
        name: "burst",
        phase: 0,
        args,
        sched,
        target,
        dueTimes: () => new Array(N).fill(Date.now() + a.leadMs),
      }),
    );
    // The spread starts `gap` after creation ends; creation takes about as long as the burst's did.
    const estimate = Math.ceil(phases[0].createSeconds * 1000 * 1.25) + 200;
    phases.push(
      await runPhase({
        name: "spread",
        phase: 1,
        args,
        sched,
        target,
        dueTimes: () => {
          const start = Date.now() + estimate + a.gapMs;
          return Array.from({ length: N }, (_, i) => start + Math.floor((i * a.spreadMs) / N));
        },
      }),
    );

    say("bench: stopping the scheduler (SIGTERM)");
    const schedulerExit = await sched.stop();
    const check = await inspectDb(dbUrl ? openPostgres({ url: dbUrl, maxConnections: 1 }) : await openPglite({ dataDir }), !!dbUrl);
    const driver = dbUrl ? `postgres.js ${packageVersion("postgres")}` : `PGlite ${packageVersion("@electric-sql/pglite")} (embedded)`;
    const machine = describeMachine(check.version, driver);

    const succeeded = check.statuses.succeeded ?? 0;
    const problems: string[] = [];
    for (const p of phases) {
      if (p.missing) problems.push(`${p.phase}: ${p.missing} jobs never called`);
      if (p.duplicates) problems.push(`${p.phase}: ${p.duplicates} repeated calls`);
      if (p.early) problems.push(`${p.phase}: ${p.early} calls before due_at`);
    }
    if (target.unexpected) problems.push(`${target.unexpected} calls with a webhook-id the bench did not create`);
    if (target.withoutId) problems.push(`${target.withoutId} calls without a webhook-id`);
    if (succeeded !== 2 * N) problems.push(`database: ${succeeded}/${2 * N} jobs succeeded (${JSON.stringify(check.statuses)})`);
    if (check.attempts !== 2 * N) problems.push(`database: ${check.attempts} attempt rows for ${2 * N} jobs`);
    if (schedulerExit !== 0) problems.push(`the scheduler exited with code ${schedulerExit} after SIGTERM`);
    const warnings = phases
      .filter((p) => p.createdLate > 0)
      .map((p) => `${p.phase}: ${p.createdLate} jobs were created after they were due (lag figures include creation time)`);

    report({ args, phases, machine, dbLabel, check, problems, warnings, logFile });
    if (args.json) {
      writeFileSync(
        args.json,
        `${JSON.stringify(
          {
            when: new Date().toISOString(),
            settings: { ...settingsOf(args), database: dbUrl ? "postgres" : "pglite", scheduler_env: passedThrough() },
            phases,
            machine,
            database_after: check,
            problems,
            warnings,
            ok: problems.length === 0,
          },
          null,
          2,
        )}\n`,
      );
      say(`bench: figures written to ${args.json}`);
    }
    if (problems.length > 0) say(`bench: the scheduler's output is in ${logFile}`);
    else if (!args.schedulerLog) rmSync(logFile, { force: true });
    return problems.length === 0 ? 0 : 1;
  } catch (err) {
    if (h.interrupted) return 130;
    say(`bench: FAILED: ${(err as Error).stack ?? err}`);
    if (sched) say(`bench: end of the scheduler's output (all of it in ${logFile}):\n${sched.logTail()}`);
    return 1;
  } finally {
    await h.cleanup();
  }
}

function settingsOf(a: BenchArgs) {
  return {
    jobs: a.jobs,
    spread_ms: a.spreadMs,
    timeout_ms: a.timeoutMs,
    worker_concurrency: a.concurrency,
    lead_ms: a.leadMs,
    gap_ms: a.gapMs,
    batch: a.batch,
    post_concurrency: a.postConcurrency,
    settle_ms: a.settleMs,
    log_level: a.logLevel,
  };
}

function report(r: {
  args: BenchArgs;
  phases: PhaseFigures[];
  machine: Machine;
  dbLabel: string;
  check: DbCheck;
  problems: string[];
  warnings: string[];
  logFile: string;
}): void {
  const env = Object.entries(passedThrough())
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const out = [
    "",
    `scheduler throughput: ${r.args.jobs} jobs per phase, WORKER_CONCURRENCY=${r.args.concurrency}, --mode=all in its own process${env ? `, ${env}` : ""}`,
    `database: ${r.dbLabel}`,
    "",
    resultsTable(r.phases),
    "",
    "lag = call arrival at the target - job due_at; wall = last first call - first due_at; deliveries/s = jobs / wall",
    "",
    cpuTable(r.phases, r.machine.cores),
    "",
    "CPU from the first due time to the last first call, in % of one core; others = every other process on the machine",
    `(with a PostgreSQL server on this machine, mostly PostgreSQL)`,
    "",
    keyValues([
      ...environmentRows(r.machine, r.check.server),
      [
        "jobs after",
        `${Object.entries(r.check.statuses)
          .map(([s, n]) => `${n} ${s}`)
          .join(", ")}; ${r.check.attempts} attempts`,
      ],
      ["creation", r.phases.map((p) => `${p.phase} ${p.createSeconds.toFixed(2)} s`).join(", ")],
    ]),
    "",
    ...r.warnings.map((w) => `WARNING ${w}`),
    r.problems.length === 0 ? "OK: every job called exactly once, none before its due time" : `FAILED:\n${r.problems.map((p) => `  ${p}`).join("\n")}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

process.exit(await main());
