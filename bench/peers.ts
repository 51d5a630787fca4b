#!/usr/bin/env bun
/**
 * The scheduler next to graphile-worker and BullMQ, on the same server, the same loopback
 * target and the same number of calls in flight, through three scenarios:
 *
 *   burst  N jobs already due when delivery starts: deliveries/s, first call → last call
 *   herd   N jobs due at one instant, created ahead: due instant → last call, s
 *   lag    N jobs due evenly over S seconds: call − due, p50 / p99 ms
 *
 * plus, from the burst, the commits and statements PostgreSQL ran per delivered job and the
 * peak memory of each system's process set. Every figure is printed with its ratio to the best
 * of the two peers (graphile-worker, BullMQ), beside the design's own minimal loop (its floor). See bench/README.md.
 *
 *   npm run bench:peers                 # 20,000 / 50,000 / 2,000 jobs, durable PostgreSQL
 *   npm run bench:peers -- --quick      # 2,000 / 5,000 / 500
 *   npm run bench:peers -- --rounds 3   # each system three times, alternated: medians
 *   npm run bench:peers -- --warm 20000 # herd and lag of processes that have already run 20,000 jobs
 */
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { RedisClient } from "bun";
import postgres from "postgres";
import { duration, UsageError, whole } from "./lib/args.ts";
import { describeMachine, machineCpuSeconds, packageVersion } from "./lib/machine.ts";
import { describeServer, environmentRows, type ServerInfo } from "./lib/server.ts";
import { countsPerStep, keyValues, percentile, quarterRates, table } from "./lib/stats.ts";
import { perJob, type ThreadCpu } from "./lib/thread-cpu.ts";
import { type PostgresCpu, postgresCpuSeconds, postgresPerJob, postmasterOf } from "./lib/postgres-cpu.ts";
import { RecordingTarget } from "./lib/target.ts";
import { costBetween, PgCost, type Cost } from "./peers/pg-cost.ts";
import { acrossRounds, roundOrder } from "./peers/rounds.ts";
import { BullmqSystem, DESIGN_FLOOR, DesignFloorSystem, GraphileSystem, SchedulerSystem, type System, type SystemContext } from "./peers/systems.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);

const USAGE = `usage: bun bench/peers.ts [options]     (npm run bench:peers -- [options])

  --quick            smaller runs: --burst 2000 --herd 5000 --lag 500
  --burst N          jobs already due when delivery starts (20000)
  --herd N           jobs due at one instant (50000)
  --lag N            jobs due evenly over --spread (2000)
  --spread DUR       the lag scenario's spread (10s)
  --concurrency N    calls in flight, every system (32)
  --systems LIST     which to run, comma-separated: scheduler,graphile-worker,bullmq,design-floor
                     (all); design-floor is the design's minimal loop, not a peer: the bound
  --timeout DUR      per scenario, from its first due instant (300s)
  --warm N           before the herd and the lag, every system's new process first delivers N
                     jobs due at once (0): figures of a process that has run, as one does in
                     production; the burst's process is new by definition
  --rounds N         run every system N times, alternated (1): the table shows medians, and
                     each ratio is the median of the ratios to the best peer of the same round
  --json FILE        also write every figure as JSON
  --log FILE         the processes' output (the scheduler's log, a JS engine's report) goes to
                     FILE and is kept; by default to a temporary file, removed after a clean run
  --fast             (to npm run bench:peers) PostgreSQL without fsync: NOT production figures

DUR: 5, 5s, 500ms, 2m. Needs PostgreSQL (DATABASE_URL or TEST_DATABASE_URL) and Redis
(REDIS_URL or TEST_REDIS_URL); npm run bench:peers starts throwaway ones.`;

interface Args {
  burst: number;
  herd: number;
  lag: number;
  spreadMs: number;
  concurrency: number;
  systems: string[];
  timeoutMs: number;
  rounds: number;
  warm: number;
  quick: boolean;
  json?: string;
  log?: string;
}

/** design-floor is no peer: the design's own minimal loop (bench/peers/design-floor.ts), the bound of what the scheduler can reach. */
const ALL = ["scheduler", "graphile-worker", "bullmq", DESIGN_FLOOR];

function parse(argv: string[]): Args | undefined {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        quick: { type: "boolean" },
        burst: { type: "string" },
        herd: { type: "string" },
        lag: { type: "string" },
        spread: { type: "string" },
        concurrency: { type: "string" },
        systems: { type: "string" },
        timeout: { type: "string" },
        rounds: { type: "string" },
        warm: { type: "string" },
        json: { type: "string" },
        log: { type: "string" },
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
  const q = !!values.quick;
  const systems = values.systems ? values.systems.split(",").map((s) => s.trim().toLowerCase()) : ALL;
  for (const s of systems) if (!ALL.includes(s)) throw new UsageError(`--systems: unknown system ${JSON.stringify(s)} (known: ${ALL.join(", ")})`);
  return {
    quick: q,
    burst: values.burst ? whole("burst", values.burst, 1, 1_000_000) : q ? 2000 : 20_000,
    herd: values.herd ? whole("herd", values.herd, 1, 1_000_000) : q ? 5000 : 50_000,
    lag: values.lag ? whole("lag", values.lag, 1, 1_000_000) : q ? 500 : 2000,
    spreadMs: values.spread ? duration("spread", values.spread) : 10_000,
    concurrency: values.concurrency ? whole("concurrency", values.concurrency, 1, 10_000) : 32,
    systems,
    timeoutMs: values.timeout ? duration("timeout", values.timeout) : 300_000,
    rounds: values.rounds ? whole("rounds", values.rounds, 1, 20) : 1,
    warm: values.warm ? whole("warm", values.warm, 0, 1_000_000) : 0,
    json: values.json,
    log: values.log,
  };
}

interface Checks {
  missing: number;
  duplicates: number;
  early: number;
  late: number;
}

interface ScenarioResult extends Checks {
  scenario: "burst" | "herd" | "lag";
  jobs: number;
  createSeconds: number;
  /** burst: N / (last first call − first call). */
  perSecond?: number;
  /** herd: due instant → last first call, s. */
  drainSeconds?: number;
  /** herd: calls/s in each quarter of its first calls (quarterRates): equal when the drain keeps one rate. */
  herdQuarterRates?: number[];
  /** herd: first calls in each half second from the due instant, to see where a drain slows. */
  herdTimeline?: number[];
  lagP50?: number;
  lagP99?: number;
  /** lag p99 without the first tenth of the jobs by due instant: the process past its first calls after its start. */
  lagP99Warm?: number;
  peakRssMiB?: number;
  /** burst: CPU of the delivering process, µs per job delivered, first call to last. */
  processCpuUs?: number;
  /** burst: the whole machine's busy CPU (every process: database, target, bench), µs per job, same span. */
  machineCpuUs?: number;
  /** burst: processCpuUs by the delivering process's threads (bench/lib/thread-cpu.ts), same span. */
  threadCpuUs?: ThreadCpu;
  /** The PostgreSQL server's processes by kind, µs a job (bench/lib/postgres-cpu.ts); only for a server on this machine. */
  postgresCpuUs?: PostgresCpu;
  /** This bench's own process (the recording target's HTTP server and its bookkeeping), µs a job. */
  benchCpuUs?: number;
  exitCode: number;
  cost?: Cost;
  extra?: Record<string, number>;
}

/** Lead time before the first due instant: creation of every system must fit in it. */
const leadMs = (n: number) => 3000 + Math.ceil(n * 0.25);

async function waitDelivered(sys: System, target: RecordingTarget, phase: number, n: number, deadline: number): Promise<void> {
  while (target.delivered(phase) < n && Date.now() < deadline) {
    sys.assertAlive();
    await Bun.sleep(10);
  }
}

interface CpuSample {
  delivered: number;
  process: number | undefined;
  threads: ThreadCpu | undefined;
  machine: { busy: number; total: number } | undefined;
  postgres: PostgresCpu | undefined;
  bench: number;
}

/** The throwaway server's postmaster, when it runs on this machine (set once in main). */
let postmaster: number | undefined;

function cpuSample(sys: System, target: RecordingTarget, phase: number): CpuSample {
  const own = process.cpuUsage();
  return {
    delivered: target.delivered(phase),
    process: sys.cpuSeconds(),
    threads: sys.threadCpuSeconds(),
    machine: machineCpuSeconds(),
    postgres: postmaster === undefined ? undefined : postgresCpuSeconds(postmaster),
    bench: (own.user + own.system) / 1e6,
  };
}

async function cpuAtFirstCall(sys: System, target: RecordingTarget, phase: number, deadline: number): Promise<CpuSample | undefined> {
  while (target.delivered(phase) === 0) {
    if (Date.now() > deadline) return undefined;
    sys.assertAlive();
    await Bun.sleep(2);
  }
  return cpuSample(sys, target, phase);
}

/** The warm-up's target phase: apart from every scenario's (0, 1, 2, …). */
const warmPhase = (phase: number) => 1_000_000 + phase;

/** --warm: N jobs due now through the process just started, all delivered before the scenario's are created. */
async function warmUp(sys: System, target: RecordingTarget, phase: number, n: number, timeoutMs: number): Promise<Checks> {
  const created = await sys.create(new Array(n).fill(Date.now()), `warm-${phase}`);
  target.expect(warmPhase(phase), created.due.keys());
  await waitDelivered(sys, target, warmPhase(phase), n, Date.now() + timeoutMs);
  const delivered = target.delivered(warmPhase(phase));
  if (delivered < n) throw new Error(`${sys.name}: the warm-up delivered ${delivered} of ${n} jobs in ${timeoutMs / 1000} s`);
  // Their completions written before the scenario starts.
  await Bun.sleep(500);
  say(`peers: ${sys.name}: warmed with ${n} jobs`);
  return checks(created.due, target.arrivals);
}

function checks(due: Map<string, number>, arrivals: Map<string, number[]>): Checks & { firsts: number[]; lags: number[]; dueLags: [number, number][] } {
  let missing = 0;
  let duplicates = 0;
  let early = 0;
  const firsts: number[] = [];
  const lags: number[] = [];
  /** [due instant, lag] of each job called: the lag scenario's warm figure leaves out the first ones due. */
  const dueLags: [number, number][] = [];
  for (const [k, at] of due) {
    const calls = arrivals.get(k);
    if (!calls) {
      missing++;
      continue;
    }
    duplicates += calls.length - 1;
    for (const c of calls) if (c < at) early++;
    firsts.push(calls[0]);
    lags.push(calls[0] - at);
    dueLags.push([at, calls[0] - at]);
  }
  return { missing, duplicates, early, late: 0, firsts, lags, dueLags };
}

async function runScenario(p: {
  sys: System;
  scenario: "burst" | "herd" | "lag";
  n: number;
  args: Args;
  target: RecordingTarget;
  phase: number;
  cost?: PgCost;
  statements: boolean;
}): Promise<ScenarioResult> {
  const { sys, scenario, n, args, target, phase } = p;
  await sys.setup(scenario);
  try {
    let created;
    let before;
    let dueInstant = 0;
    let warm: Checks | undefined;
    if (scenario === "burst") {
      created = await sys.create(new Array(n).fill(Date.now()), `${scenario}-${phase}`);
      target.expect(phase, created.due.keys());
      if (p.cost && sys.database) {
        if (!(await p.cost.quiet(sys.database))) say(`peers: ${sys.name}: connections still open before the burst; its counts may be off`);
        before = await p.cost.snapshot(sys.database, p.statements);
      }
      await sys.start();
    } else {
      // The herd's counts include its creation (through the running process): its statements
      // are told apart by their text in the report. A warm-up's would be counted with them: none then.
      if (scenario === "herd" && !args.warm && p.cost && sys.database && (await p.cost.quiet(sys.database)))
        before = await p.cost.snapshot(sys.database, p.statements);
      await sys.start();
      if (args.warm) warm = await warmUp(sys, target, phase, args.warm, args.timeoutMs);
      const first = Date.now() + leadMs(n);
      const dues = scenario === "herd" ? new Array(n).fill(first) : Array.from({ length: n }, (_, i) => first + Math.floor((i * args.spreadMs) / n));
      dueInstant = first;
      created = await sys.create(dues, `${scenario}-${phase}`);
      target.expect(phase, created.due.keys());
    }
    say(`peers: ${sys.name} ${scenario}: ${n} jobs created in ${created.seconds.toFixed(2)} s`);
    const firstDue = Math.min(...created.due.values());
    const deadline = Math.max(firstDue, Date.now()) + args.timeoutMs;
    // CPU is read from the first call to the last: the start-up of the process is left out.
    const cpu0 = scenario === "burst" ? await cpuAtFirstCall(sys, target, phase, deadline) : undefined;
    await waitDelivered(sys, target, phase, n, deadline);
    const cpu1 = cpu0 ? cpuSample(sys, target, phase) : undefined;
    await Bun.sleep(1000); // repeated calls would come now
    const rss = sys.peakRss();
    const extra = scenario === "burst" ? await sys.extra?.() : undefined;
    const exitCode = await sys.stop();
    let cost: Cost | undefined;
    if (before && p.cost && sys.database) {
      if (!(await p.cost.quiet(sys.database))) say(`peers: ${sys.name}: connections still open after the ${scenario}; its counts may be off`);
      cost = costBetween(before, await p.cost.snapshot(sys.database, p.statements));
    }
    const c = checks(created.due, target.arrivals);
    const r: ScenarioResult = {
      scenario,
      jobs: n,
      createSeconds: created.seconds,
      // A warm-up's jobs are held to the same rules as the scenario's.
      missing: c.missing + (warm?.missing ?? 0),
      duplicates: c.duplicates + (warm?.duplicates ?? 0),
      early: c.early + (warm?.early ?? 0),
      late: created.late,
      peakRssMiB: rss === undefined ? undefined : rss / 2 ** 20,
      exitCode,
      cost,
      extra,
    };
    if (cpu0 && cpu1 && cpu1.delivered > cpu0.delivered) {
      const jobs = cpu1.delivered - cpu0.delivered;
      if (cpu0.process !== undefined && cpu1.process !== undefined) r.processCpuUs = ((cpu1.process - cpu0.process) / jobs) * 1e6;
      if (cpu0.machine && cpu1.machine) r.machineCpuUs = ((cpu1.machine.busy - cpu0.machine.busy) / jobs) * 1e6;
      if (cpu0.threads && cpu1.threads) r.threadCpuUs = perJob(cpu0.threads, cpu1.threads, jobs);
      // Only for a system on PostgreSQL: BullMQ's would be the idle server's, and as the lowest
      // figure it became every PostgreSQL row's ratio base (102 µs a job showed as 204×).
      if (sys.database && cpu0.postgres && cpu1.postgres) r.postgresCpuUs = postgresPerJob(cpu0.postgres, cpu1.postgres, jobs);
      r.benchCpuUs = ((cpu1.bench - cpu0.bench) / jobs) * 1e6;
    }
    const firsts = c.firsts.sort((a, b) => a - b);
    if (scenario === "burst" && firsts.length > 1) r.perSecond = (firsts.length / (firsts[firsts.length - 1] - firsts[0])) * 1000;
    if (scenario === "herd" && firsts.length) {
      r.drainSeconds = (firsts[firsts.length - 1] - dueInstant) / 1000;
      r.herdQuarterRates = quarterRates(firsts);
      r.herdTimeline = countsPerStep(firsts, dueInstant, 500);
    }
    if (scenario === "lag" && c.lags.length) {
      const lags = c.lags.sort((a, b) => a - b);
      r.lagP50 = percentile(lags, 50);
      r.lagP99 = percentile(lags, 99);
      const byDue = c.dueLags.sort((a, b) => a[0] - b[0]);
      r.lagP99Warm = percentile(
        byDue
          .slice(Math.floor(byDue.length / 10))
          .map((x) => x[1])
          .sort((a, b) => a - b),
        99,
      );
    }
    say(`peers: ${sys.name} ${scenario}: ${target.delivered(phase)}/${n} delivered; ${JSON.stringify({ ...r, cost: undefined })}`);
    return r;
  } finally {
    await sys.teardown();
  }
}

interface Row {
  label: string;
  /** Higher is better (rates); otherwise lower is. */
  higher: boolean;
  digits: number;
  value: (r: ScenarioResult[]) => number | undefined;
}

const of = (rs: ScenarioResult[], s: string) => rs.find((r) => r.scenario === s);
/** A database counter of the burst (pg-cost.ts) divided by its jobs; none without it. */
function costPerBurstJob(label: string, digits: number, pick: (c: Cost) => number | undefined): Row {
  return {
    label,
    higher: false,
    digits,
    value: (r) => {
      const b = of(r, "burst");
      const v = b?.cost ? pick(b.cost) : undefined;
      return b && v !== undefined ? v / b.jobs : undefined;
    },
  };
}

/** The process's CPU by its threads (bench/lib/thread-cpu.ts), one row each. */
const THREAD_ROWS: [keyof ThreadCpu, string][] = [
  ["js", "the JS thread"],
  ["http", "the HTTP client thread"],
  ["jit", "the JIT compiler threads"],
  ["other", "the other threads"],
];

/** The database server's CPU by its processes (bench/lib/postgres-cpu.ts), one row each. */
const POSTGRES_ROWS: [keyof PostgresCpu, string][] = [
  ["backends", "client backends"],
  ["walwriter", "the WAL writer"],
  ["autovacuum", "autovacuum"],
  ["background", "checkpointer, bgwriter"],
  ["exited", "exited processes"],
  ["other", "the rest"],
];

const ROWS: Row[] = [
  { label: "burst: deliveries/s", higher: true, digits: 0, value: (r) => of(r, "burst")?.perSecond },
  { label: "herd: due → last call, s", higher: false, digits: 2, value: (r) => of(r, "herd")?.drainSeconds },
  { label: "herd: calls/s, first quarter", higher: true, digits: 0, value: (r) => of(r, "herd")?.herdQuarterRates?.[0] },
  { label: "herd: calls/s, last quarter", higher: true, digits: 0, value: (r) => of(r, "herd")?.herdQuarterRates?.[3] },
  { label: "lag p50, ms", higher: false, digits: 0, value: (r) => of(r, "lag")?.lagP50 },
  { label: "lag p99, ms", higher: false, digits: 0, value: (r) => of(r, "lag")?.lagP99 },
  { label: "lag p99 warm, ms", higher: false, digits: 0, value: (r) => of(r, "lag")?.lagP99Warm },
  {
    label: "create (herd), jobs/s",
    higher: true,
    digits: 0,
    value: (r) => {
      const h = of(r, "herd");
      return h && h.createSeconds > 0 ? h.jobs / h.createSeconds : undefined;
    },
  },
  costPerBurstJob("commits / job (burst)", 3, (c) => c.commits),
  costPerBurstJob("WAL bytes / job (burst)", 0, (c) => c.walBytes),
  costPerBurstJob("full-page images / job (burst)", 3, (c) => c.walFpi),
  costPerBurstJob("statements / job (burst)", 3, (c) => c.statements),
  { label: "CPU µs / job, process (burst)", higher: false, digits: 0, value: (r) => of(r, "burst")?.processCpuUs },
  ...THREAD_ROWS.map(([k, what]): Row => ({ label: `  of which ${what}`, higher: false, digits: 0, value: (r) => of(r, "burst")?.threadCpuUs?.[k] })),
  {
    label: "CPU µs / job, PostgreSQL (burst)",
    higher: false,
    digits: 0,
    value: (r) => {
      const p = of(r, "burst")?.postgresCpuUs;
      return p && Object.values(p).reduce((a, b) => a + b, 0);
    },
  },
  ...POSTGRES_ROWS.map(([k, what]): Row => ({ label: `  of which ${what}`, higher: false, digits: 0, value: (r) => of(r, "burst")?.postgresCpuUs?.[k] })),
  { label: "CPU µs / job, bench and target (burst)", higher: false, digits: 0, value: (r) => of(r, "burst")?.benchCpuUs },
  { label: "CPU µs / job, machine (burst)", higher: false, digits: 0, value: (r) => of(r, "burst")?.machineCpuUs },
  {
    label: "peak RSS MiB (max of scenarios)",
    higher: false,
    digits: 0,
    value: (r) => {
      const v = r.map((x) => x.peakRssMiB).filter((x): x is number => x !== undefined);
      return v.length ? Math.max(...v) : undefined;
    },
  },
];

/** A scenario's most frequent statements, one line each: per job, server µs per job, mean ms per call, rows per call, its text. */
function topStatements(title: string, top: NonNullable<Cost["top"]>, jobs: number): string[] {
  return [
    `${title} (top ${top.length}): per job, server µs per job, mean ms per call, rows per call`,
    ...top.map(
      (t) =>
        `  ${(t.calls / jobs).toFixed(3).padStart(7)} ${((t.ms * 1000) / jobs).toFixed(1).padStart(7)} ${(t.ms / t.calls).toFixed(2).padStart(7)} ${(t.rows / t.calls).toFixed(0).padStart(5)}  ${t.query.replace(/\s+/g, " ").slice(0, 100)}`,
    ),
  ];
}

/** The figures of every round (one map per round: system → its scenarios), medians over rounds. */
function comparison(rounds: Map<string, ScenarioResult[]>[], names: string[]): string {
  const peers = names.filter((n) => n !== "scheduler" && n !== DESIGN_FLOOR);
  const rows = ROWS.map((row) => {
    const cells = acrossRounds(
      rounds.map((results) => new Map(names.map((n) => [n, row.value(results.get(n)!)]))),
      names,
      peers,
      row.higher,
    );
    return [
      row.label + (row.higher ? " ↑" : " ↓"),
      ...names.map((n) => {
        const { value, ratio } = cells.get(n)!;
        if (value === undefined) return "-";
        return `${value.toFixed(row.digits)}${ratio === undefined ? "" : ` (${ratio.toFixed(2)}×)`}`;
      }),
    ];
  });
  const checksRow = (label: string, f: (r: ScenarioResult) => number) => [
    label,
    ...names.map((n) => String(rounds.reduce((s, results) => s + results.get(n)!.reduce((t, r) => t + f(r), 0), 0))),
  ];
  rows.push(
    checksRow("missing (all scenarios)", (r) => r.missing),
    checksRow("duplicate calls", (r) => r.duplicates),
    checksRow("early calls", (r) => r.early),
  );
  return table(["figure", ...names], rows);
}

/** Each round's burst and herd, system by system, in the order they ran: how far the box moved between rounds. */
function roundsTable(rounds: Map<string, ScenarioResult[]>[], orders: string[][], names: string[]): string {
  return table(
    ["round", "order", ...names.flatMap((n) => [`${n} burst/s`, `${n} herd s`])],
    rounds.map((results, i) => [
      String(i + 1),
      orders[i]!.join(" → "),
      ...names.flatMap((n) => {
        const rs = results.get(n)!;
        return [of(rs, "burst")?.perSecond?.toFixed(0) ?? "-", of(rs, "herd")?.drainSeconds?.toFixed(2) ?? "-"];
      }),
    ]),
  );
}

async function main(): Promise<number> {
  let args: Args | undefined;
  try {
    args = parse(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      say(`peers: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!args) return 0;
  const adminUrl = process.env.DATABASE_URL || process.env.TEST_DATABASE_URL;
  const redisUrl = process.env.REDIS_URL || process.env.TEST_REDIS_URL;
  if (!adminUrl) {
    say("peers: needs PostgreSQL: set DATABASE_URL, or run npm run bench:peers (starts a throwaway server)");
    return 2;
  }
  process.env.TEST_DATABASE_URL = adminUrl; // createDatabase/dropDatabase read it

  const logFile = args.log ?? join(tmpdir(), `scheduler-peers-${process.pid}.log`);
  writeFileSync(logFile, "");
  const target = new RecordingTarget();
  const cost = new PgCost(adminUrl);
  const ctx: SystemContext = { targetUrl: target.url, concurrency: args.concurrency, logFile, redisUrl };
  const systems: System[] = [];
  for (const s of args.systems) {
    if (s === "scheduler") systems.push(new SchedulerSystem(ctx));
    if (s === "graphile-worker") systems.push(new GraphileSystem(ctx));
    if (s === "bullmq") systems.push(new BullmqSystem(ctx));
    if (s === DESIGN_FLOOR) systems.push(new DesignFloorSystem(ctx));
  }
  let current: System | undefined;
  const onSignal = () => {
    say("peers: interrupted; stopping the current system");
    (current?.teardown() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  let server: ServerInfo;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    server = await describeServer((q) => admin.unsafe(q) as never);
    const [{ pid, port }] = await admin<{ pid: number; port: number | null }[]>`SELECT pg_backend_pid() AS pid, inet_client_port() AS port`;
    postmaster = postmasterOf(pid, port);
  } finally {
    await admin.end();
  }
  const statements = await cost.hasStatements();
  if (!server.durable) say("peers: WARNING the server is not durable (fsync/synchronous_commit off): these are not production figures");
  if (!statements) say("peers: pg_stat_statements is not available; statements per job will be missing");

  const rounds: Map<string, ScenarioResult[]>[] = [];
  const orders: string[][] = [];
  const problems: string[] = [];
  let phase = 0;
  try {
    for (let round = 0; round < args.rounds; round++) {
      const results = new Map<string, ScenarioResult[]>();
      const order = roundOrder(systems, round);
      orders.push(order.map((s) => s.name));
      rounds.push(results);
      if (args.rounds > 1) say(`peers: round ${round + 1} of ${args.rounds}: ${order.map((s) => s.name).join(", ")}`);
      for (const sys of order) {
        current = sys;
        const rs: ScenarioResult[] = [];
        for (const [scenario, n] of [
          ["burst", args.burst],
          ["herd", args.herd],
          ["lag", args.lag],
        ] as const) {
          const r = await runScenario({ sys, scenario, n, args, target, phase: phase++, cost, statements });
          rs.push(r);
          const what = `${sys.name} ${scenario}${args.rounds > 1 ? ` (round ${round + 1})` : ""}`;
          if (r.missing) problems.push(`${what}: ${r.missing} jobs never called`);
          if (r.duplicates) problems.push(`${what}: ${r.duplicates} repeated calls`);
          if (r.early) problems.push(`${what}: ${r.early} calls before the due time`);
          if (r.exitCode !== 0) problems.push(`${what}: its process exited with code ${r.exitCode} on SIGTERM`);
        }
        results.set(sys.name, rs);
      }
    }
  } catch (err) {
    say(`peers: FAILED: ${(err as Error).stack ?? err}`);
    say(`peers: the processes' output is in ${logFile}`);
    await current?.teardown();
    return 1;
  } finally {
    target.stop();
    await cost.close();
    for (const s of systems) if (s instanceof BullmqSystem) s.close();
  }
  if (target.unexpected) problems.push(`${target.unexpected} calls with a key no scenario created`);
  if (target.withoutId) problems.push(`${target.withoutId} calls without a webhook-id`);

  let redisVersion = "-";
  if (redisUrl && args.systems.includes("bullmq")) {
    const r = new RedisClient(redisUrl);
    redisVersion = /^redis_version:(.*)$/m.exec(String(await r.send("INFO", ["server"])))?.[1]?.trim() ?? "?";
    r.close();
  }
  const machine = describeMachine(
    server.version,
    `postgres.js ${packageVersion("postgres")}, graphile-worker ${packageVersion("graphile-worker")} (pg ${packageVersion("pg")}), BullMQ ${packageVersion("bullmq")} (Bun RedisClient)`,
  );

  const names = systems.map((s) => s.name);
  // The statements and extras below are the last round's.
  const results = rounds[rounds.length - 1]!;
  const out: string[] = [
    "",
    `peers: ${args.burst} burst / ${args.herd} herd / ${args.lag} lag jobs (over ${args.spreadMs / 1000} s), ${args.concurrency} calls in flight each, one loopback Bun target answering 200${args.quick ? " (--quick)" : ""}${args.rounds > 1 ? `, ${args.rounds} rounds alternated` : ""}${args.warm ? `; every process warmed with ${args.warm} jobs before its herd and lag (no herd statement counts then)` : ""}`,
    "",
    comparison(rounds, names),
    "",
    ...(args.rounds > 1 ? [roundsTable(rounds, orders, names), ""] : []),
    args.rounds > 1
      ? `Figures: the median of ${args.rounds} rounds (missing, duplicate, early: the sum). (N×) = the median of each round's figure / the best peer's of that round; ↑ higher is better, ↓ lower is better.`
      : "(N×) = the figure / the best peer's (graphile-worker, BullMQ) for that row; ↑ higher is better, ↓ lower is better.",
    "burst: jobs already due when the delivering process starts, N / (last first call − first call).",
    "herd: jobs due at one instant created ahead, due instant → last first call; calls/s of its first and last quarter of first calls",
    "  (by count; equal when the herd drains at one rate). lag: first call − due, nearest rank;",
    "  warm: without the first tenth of the jobs by due instant (each system's process is new: its first calls after its start).",
    "create: the herd's jobs / the time to create them (scheduler: POST /v1/jobs/batch; graphile-worker: addJobs; BullMQ: addBulk;",
    "  design-floor: one INSERT of plain SQL; 1000 a call, 2 in flight).",
    "design-floor: not a peer (no ratio is taken to it) but the design's minimal loop (bench/peers/design-floor.ts: a SKIP LOCKED",
    "  claim of 500, the call, a completion of 200; no fence, pre-call check, attempt log, signature or API): what no implementation",
    "  of the design can beat on this server in this run.",
    "commits / job: pg_stat_database.xact_commit of the system's database, burst start → stop, / jobs;",
    "statements / job: pg_stat_statements calls (top level, without BEGIN/COMMIT) over the same span. peak RSS: VmHWM of the delivering process.",
    "WAL bytes, full-page images / job: pg_stat_wal of the whole server over the same span (one system runs at a time).",
    "CPU µs / job: user + system time of the delivering process (/proc/PID/stat), and busy time of the whole machine (/proc/stat: the database, the target and this bench too), first call → last, / the jobs delivered in that span (10 ms ticks).",
    "  of which: the same by the process's threads (/proc/PID/task): its JS thread, Bun's HTTP client thread (fetch), the JS engine's JIT compiler threads",
    "  (a new process compiles its hot code during the burst), and the others (garbage collector helpers, the allocator's scavenger, thread pools).",
    "PostgreSQL: the same for the server's processes (children of its postmaster, when it runs on this machine), by kind: the client backends",
    "  (every statement of the system), the WAL writer, autovacuum, checkpointer and background writer, those that exited meanwhile, the rest.",
    "bench and target: this bench's own process, which is the webhook target every system calls (and its bookkeeping).",
    "",
  ];
  if (args.rounds > 1) out.push(`Statements and extras: round ${args.rounds}'s.`);
  for (const [name, rs] of results) {
    const b = of(rs, "burst");
    const h = of(rs, "herd");
    if (h?.cost?.top) out.push(...topStatements(`${name}: statements per job in the herd, creation included`, h.cost.top, h.jobs));
    if (b?.cost?.top) out.push(...topStatements(`${name}: statements per job in the burst`, b.cost.top, b.jobs));
    if (b?.extra)
      out.push(
        `${name}: ${Object.entries(b.extra)
          .map(([k, v]) => `${k.replaceAll("_", " ")} ${v.toFixed(k.includes("mib") ? 0 : 2)}`)
          .join(", ")}`,
      );
  }
  out.push(
    "",
    keyValues([...environmentRows(machine, server), ["redis", redisVersion]]),
    "",
    ...rounds.flatMap((rr, i) =>
      [...rr].flatMap(([name, rs]) =>
        rs
          .filter((r) => r.late > 0)
          .map(
            (r) =>
              `WARNING ${name} ${r.scenario}${args.rounds > 1 ? ` (round ${i + 1})` : ""}: ${r.late} jobs created after their due time (their lag includes creation)`,
          ),
      ),
    ),
    problems.length === 0 ? "OK: every system called every job exactly once, none before its due time" : `FAILED:\n${problems.map((x) => `  ${x}`).join("\n")}`,
  );
  process.stdout.write(`${out.join("\n")}\n`);
  if (args.json) {
    writeFileSync(
      args.json,
      `${JSON.stringify({ when: new Date().toISOString(), args, server, machine, results: Object.fromEntries(results), rounds: rounds.map((r) => Object.fromEntries(r)), problems }, null, 2)}\n`,
    );
    say(`peers: figures written to ${args.json}`);
  }
  if (problems.length) say(`peers: the processes' output is in ${logFile}`);
  else if (!args.log) rmSync(logFile, { force: true });
  return problems.length ? 1 : 0;
}

process.exit(await main());
