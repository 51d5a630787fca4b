#!/usr/bin/env bun
/**
 * The 9:00:00 thundering herd, end to end: N jobs (default 50000) all due at one instant,
 * created ahead of it through the API, against a scheduler in its own process. How long the
 * herd takes to drain, how late the calls are, how much memory the scheduler needs for it,
 * and whether any job was missed, called twice or called early. With --rate, the scheduler's
 * global dispatch rate (SCHEDULER_DISPATCH_RATE) spreads the herd out.
 *
 *   npm run bench:herd                      # 50000 jobs, throwaway PostgreSQL
 *   npm run bench:herd -- --rate 2000
 *
 * See bench/README.md.
 */
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Db } from "../src/store/db.ts";
import { openPglite } from "../src/store/pglite-driver.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { duration, UsageError, whole } from "./lib/args.ts";
import { defaultLeadMs, defaultScheduleLeadMs, type HerdFigures, mib, runHerd } from "./lib/herd.ts";
import { describeMachine, packageVersion, type Machine } from "./lib/machine.ts";
import { passedThrough, SchedulerProcess } from "./lib/scheduler-process.ts";
import { keyValues, table } from "./lib/stats.ts";
import { RecordingTarget } from "./lib/target.ts";
import { benchHarness } from "./lib/harness.ts";
import { describeServer, environmentRows, type ServerInfo } from "./lib/server.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);
/** Progress (creation, deliveries so far) only for a person watching; errors always. */
const progress = process.stderr.isTTY ? say : undefined;

interface HerdArgs {
  jobs: number;
  schedules?: "allow" | "skip" | "queue";
  rate?: number;
  concurrency: number;
  leadMs?: number;
  timeoutMs: number;
  settleMs: number;
  batch: number;
  postConcurrency: number;
  logLevel: string;
  schedulerLog?: string;
  json?: string;
}

const USAGE = `usage: bun bench/herd.ts [options]     (npm run bench:herd -- [options])

  --jobs N              jobs in the herd, all due at one instant (50000)
  --schedules           the herd is N schedules whose occurrences are all due at one
                        whole second, made through POST /v1/schedules, instead of jobs
  --overlap POLICY      with --schedules: the schedules' overlap, allow | skip | queue (skip)
  --rate N              SCHEDULER_DISPATCH_RATE: global dispatches per second (none)
  --concurrency N       WORKER_CONCURRENCY of the scheduler (200)
  --lead DUR            the herd is due DUR after creation starts (3s + 0.2 ms per job)
  --timeout DUR         from the due instant, give up after DUR (300s)
  --settle DUR          after the last call, listen this long for duplicates (1s)
  --batch N             jobs per POST /v1/jobs/batch (1000, the API's maximum)
  --post-concurrency N  batch requests in flight while creating (2; with --schedules,
                        schedule requests in flight: 8)
  --log-level LEVEL     the scheduler's LOG_LEVEL (warn)
  --scheduler-log FILE  where the scheduler's output goes (a temp file)
  --json FILE           also write the figures as JSON

DUR: 5, 5s, 500ms, 2m (a bare number is seconds).
Database: DATABASE_URL or TEST_DATABASE_URL (npm run bench:herd starts a throwaway
server); with neither, the embedded PGlite. SCHEDULER_* variables are passed on to
the scheduler, e.g. SCHEDULER_DISPATCH_BATCH=1000. Progress goes to stderr when
stderr is a terminal; the report to stdout.`;

function parseHerdArgs(argv: string[]): HerdArgs | undefined {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        jobs: { type: "string" },
        schedules: { type: "boolean" },
        overlap: { type: "string" },
        rate: { type: "string" },
        concurrency: { type: "string" },
        lead: { type: "string" },
        timeout: { type: "string" },
        settle: { type: "string" },
        batch: { type: "string" },
        "post-concurrency": { type: "string" },
        "log-level": { type: "string" },
        "scheduler-log": { type: "string" },
        json: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return undefined;
  }
  const levels = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
  const logLevel = values["log-level"] ?? "warn";
  if (!levels.includes(logLevel)) throw new UsageError(`--log-level must be one of ${levels.join(", ")}`);
  const overlaps = ["allow", "skip", "queue"] as const;
  const overlap = values.overlap ?? "skip";
  if (!overlaps.includes(overlap as (typeof overlaps)[number])) throw new UsageError(`--overlap must be one of ${overlaps.join(", ")}`);
  if (values.overlap !== undefined && !values.schedules) throw new UsageError("--overlap goes with --schedules");
  return {
    jobs: values.jobs ? whole("jobs", values.jobs, 1, 10_000_000) : 50_000,
    schedules: values.schedules ? (overlap as (typeof overlaps)[number]) : undefined,
    rate: values.rate ? whole("rate", values.rate, 1, 10_000_000) : undefined,
    concurrency: values.concurrency ? whole("concurrency", values.concurrency, 1, 10_000) : 200,
    leadMs: values.lead ? duration("lead", values.lead) : undefined,
    timeoutMs: values.timeout ? duration("timeout", values.timeout) : 300_000,
    settleMs: values.settle ? duration("settle", values.settle) : 1000,
    batch: values.batch ? whole("batch", values.batch, 1, 1000) : 1000,
    postConcurrency: values["post-concurrency"] ? whole("post-concurrency", values["post-concurrency"], 1, 64) : values.schedules ? 8 : 2,
    logLevel,
    schedulerLog: values["scheduler-log"],
    json: values.json,
  };
}

interface DbCheck {
  version: string;
  /** The server and its settings; undefined on PGlite. */
  server?: ServerInfo;
  statuses: Record<string, number>;
  attempts: number;
  /** When the first and the last job was made (ms since the epoch, the database's clock). */
  madeFirst: number | null;
  madeLast: number | null;
}

async function inspectDb(db: Db, postgres: boolean): Promise<DbCheck> {
  try {
    const [{ version }] = await db.query<{ version: string }>("SELECT version() AS version");
    const server = postgres ? await describeServer((q) => db.query(q)) : undefined;
    const rows = await db.query<{ status: string; n: number }>("SELECT status, count(*)::int AS n FROM jobs GROUP BY status ORDER BY status");
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM attempts");
    const [made] = await db.query<{ first: Date | null; last: Date | null }>("SELECT min(created_at) AS first, max(created_at) AS last FROM jobs");
    return {
      version,
      server,
      statuses: Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])),
      attempts: Number(n),
      madeFirst: made.first ? new Date(made.first).getTime() : null,
      madeLast: made.last ? new Date(made.last).getTime() : null,
    };
  } finally {
    await db.close();
  }
}

const num = (n: number | null | undefined, digits = 0) => (n === null || n === undefined || Number.isNaN(n) ? "-" : n.toFixed(digits));

function herdTable(rate: number | undefined, f: HerdFigures): string {
  return table(
    ["jobs", "rate/s", "create s", "drain s", "deliveries/s", "lag p50 ms", "p99 ms", "max ms", "max in 1 s", "peak RSS MiB", "early", "missing", "dupes"],
    [
      [
        String(f.jobs),
        rate ? String(rate) : "-",
        num(f.createSeconds, 2),
        num(f.drainSeconds, 2),
        num(f.deliveriesPerSecond),
        num(f.lagMs?.p50),
        num(f.lagMs?.p99),
        num(f.lagMs?.max),
        String(f.maxPerSecond),
        f.peakRss === null ? "-" : mib(f.peakRss),
        String(f.early + f.earlyByHeader),
        String(f.missing),
        String(f.duplicates),
      ],
    ],
  );
}

async function main(): Promise<number> {
  let args: HerdArgs | undefined;
  try {
    args = parseHerdArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      say(`bench: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!args) return 0;

  const logFile = args.schedulerLog ?? join(tmpdir(), `scheduler-herd-${process.pid}.log`);
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
    const { dbUrl, dataDir, label: dbLabel } = await h.database("herd");
    progress?.(`bench: database: ${dbLabel}`);
    progress?.(`bench: scheduler output: ${logFile}`);
    target = new RecordingTarget(args.schedules ? "idempotency-key" : "webhook-id");
    const env: Record<string, string> = {};
    if (args.schedules) env.SCHEDULER_TENANT_MAX_SCHEDULES = String(Math.max(1000, args.jobs));
    if (args.rate !== undefined) env.SCHEDULER_DISPATCH_RATE = String(args.rate);
    sched = await SchedulerProcess.start({ databaseUrl: dbUrl, dataDir, concurrency: args.concurrency, logLevel: args.logLevel, logFile, env });
    await sched.waitReady();
    progress?.(`bench: scheduler ready at ${sched.url} (pid ${sched.proc.pid}), target at ${target.url}`);
    const s = sched;

    const leadMs = args.leadMs ?? (args.schedules ? defaultScheduleLeadMs(args.jobs) : defaultLeadMs(args.jobs));
    const f = await runHerd({
      sched: { url: s.url, pid: s.proc.pid, assertAlive: () => s.assertAlive() },
      target,
      settings: {
        jobs: args.jobs,
        leadMs,
        timeoutMs: args.timeoutMs,
        settleMs: args.settleMs,
        batch: args.batch,
        postConcurrency: args.postConcurrency,
        schedules: args.schedules,
      },
      phase: 0,
      tag: "herd",
      progress,
    });

    progress?.("bench: stopping the scheduler (SIGTERM)");
    const schedulerExit = await sched.stop();
    const check = await inspectDb(dbUrl ? openPostgres({ url: dbUrl, maxConnections: 1 }) : await openPglite({ dataDir }), !!dbUrl);
    const driver = dbUrl ? `postgres.js ${packageVersion("postgres")}` : `PGlite ${packageVersion("@electric-sql/pglite")} (embedded)`;
    const machine = describeMachine(check.version, driver);

    const N = args.jobs;
    const problems: string[] = [];
    if (f.missing) problems.push(`${f.missing} jobs never called${f.timedOut ? ` within ${args.timeoutMs / 1000} s` : ""}`);
    if (f.duplicates) problems.push(`${f.duplicates} repeated calls`);
    if (f.early) problems.push(`${f.early} calls before the job's due_at`);
    if (f.earlyByHeader) problems.push(`${f.earlyByHeader} calls before the Scheduler-Scheduled-For they carried`);
    if (f.headerMismatch) problems.push(`${f.headerMismatch} calls whose Scheduler-Scheduled-For is not the job's due_at`);
    const key = args.schedules ? "an Idempotency-Key" : "a webhook-id";
    if (target.unexpected) problems.push(`${target.unexpected} calls with ${key} the bench did not create`);
    if (target.withoutId) problems.push(`${target.withoutId} calls without ${key}`);
    if ((check.statuses.succeeded ?? 0) !== N)
      problems.push(`database: ${check.statuses.succeeded ?? 0}/${N} jobs succeeded (${JSON.stringify(check.statuses)})`);
    if (check.attempts !== N) problems.push(`database: ${check.attempts} attempt rows for ${N} jobs`);
    if (schedulerExit !== 0) problems.push(`the scheduler exited with code ${schedulerExit} after SIGTERM`);
    const warnings: string[] = [];
    if (f.createdLate > 0) warnings.push(`${f.createdLate} jobs were created after the due instant (raise --lead); their lag includes creation time`);
    if (args.rate !== undefined && f.maxPerSecondAfterFirst !== null && f.maxPerSecondAfterFirst > args.rate * 1.15) {
      warnings.push(`${f.maxPerSecondAfterFirst} calls in one second after the first, above --rate ${args.rate} + 15 %`);
    }

    report({ args, leadMs, f, machine, dbLabel, check, problems, warnings });
    if (args.json) {
      writeFileSync(
        args.json,
        `${JSON.stringify(
          {
            when: new Date().toISOString(),
            settings: { ...args, lead_ms: leadMs, database: dbUrl ? "postgres" : "pglite", scheduler_env: { ...passedThrough(), ...env } },
            figures: f,
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

/** When the generator made the occurrences, from their instant (jobs.created_at, the database's clock). */
function madeLine(c: DbCheck, instant: number): string {
  if (c.madeFirst === null || c.madeLast === null) return "-";
  const s = (ms: number) => `${((ms - instant) / 1000).toFixed(2)} s`;
  return `the first ${s(c.madeFirst)}, the last ${s(c.madeLast)} after the fire instant`;
}

function report(r: {
  args: HerdArgs;
  leadMs: number;
  f: HerdFigures;
  machine: Machine;
  dbLabel: string;
  check: DbCheck;
  problems: string[];
  warnings: string[];
}): void {
  const { f } = r;
  const env = Object.entries(passedThrough())
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const rate = r.args.rate !== undefined ? `, SCHEDULER_DISPATCH_RATE=${r.args.rate}` : "";
  const out = [
    "",
    `scheduler herd: ${r.args.schedules ? `${r.args.jobs} schedules (overlap ${r.args.schedules}) whose occurrences are` : `${r.args.jobs} jobs`} due at one instant, WORKER_CONCURRENCY=${r.args.concurrency}${rate}, --mode=all in its own process${env ? `, ${env}` : ""}`,
    `database: ${r.dbLabel}`,
    "",
    herdTable(r.args.rate, f),
    "",
    r.args.schedules
      ? "create = POST /v1/schedules of every schedule; drain = the fire instant → last first call of an occurrence; deliveries/s = occurrences / drain"
      : "create = POST /v1/jobs/batch of all jobs; drain = due instant → last first call; deliveries/s = jobs / drain",
    "lag = first call's arrival − due_at; max in 1 s = most calls in any 1-second window;",
    "peak RSS = the scheduler process's VmHWM after the drain; early = calls before due_at or before their Scheduler-Scheduled-For",
    "",
    keyValues([
      ["due at", `${f.dueAt}, ${r.leadMs} ms after creation started; creation ended ${(f.slackMs / 1000).toFixed(2)} s before it`],
      ["calls/s", `per second after the due instant: ${f.perSecond.join(" ")}`],
      ...(r.args.schedules ? ([["occurrences made", madeLine(r.check, Date.parse(f.dueAt))]] as [string, string][]) : []),
      [
        "steady 1 s max",
        f.maxPerSecondAfterFirst === null
          ? "- (drained within 2 s of the first call)"
          : `${f.maxPerSecondAfterFirst} (windows starting ≥ 1 s after the first call)`,
      ],
      ["first call", f.lagMs ? `${f.lagMs.min} ms after the due instant` : "-"],
      [
        "scheduler RSS",
        `peak ${f.peakRssBeforeDue === null ? "-" : mib(f.peakRssBeforeDue)} MiB before the due instant (start + creation), ${f.peakRss === null ? "-" : mib(f.peakRss)} MiB after the drain; ${f.rssAfter === null ? "-" : mib(f.rssAfter)} MiB at the end`,
      ],
      [
        "cpu in drain",
        `scheduler ${num(f.cpu.scheduler)} %, bench + target ${num(f.cpu.bench)} %, others (PostgreSQL) ${num(f.cpu.other)} % of one core; machine ${num(f.cpu.machineBusy)} % busy`,
      ],
      ...environmentRows(r.machine, r.check.server),
      [
        "jobs after",
        `${Object.entries(r.check.statuses)
          .map(([s, n]) => `${n} ${s}`)
          .join(", ")}; ${r.check.attempts} attempts`,
      ],
    ]),
    "",
    ...r.warnings.map((w) => `WARNING ${w}`),
    r.problems.length === 0 ? "OK: every job called exactly once, none before its due time" : `FAILED:\n${r.problems.map((p) => `  ${p}`).join("\n")}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

process.exit(await main());
