#!/usr/bin/env bun
/**
 * Where the worker's process time goes, one layer of its own code at a time. Every step runs
 * the scheduler's claim (ClaimDueIds, opening the attempts: the claim is the pre-call check,
 * as for a worker in the dispatcher's process) and its completion (CompleteAttempts), through
 * its own query functions, against one durable server and one loopback target in its own
 * process, 32 calls in flight. What changes between steps is how much of the worker's
 * per-job code runs around the call:
 *
 *   statements      a bare fetch of the job's URL and body; completions batched by hand
 *   +deliver        deliver(): headers, the call's limit, the pinned target, the outcome
 *   +callAttempt    callAttempt(): metrics, payloads, the host limiter, the decision, the
 *                   completion batcher (the worker's whole per-call path, less its bookkeeping)
 *
 * The scheduler itself is bench:peers' figure ("CPU µs / job, process"); the gap between the
 * last step and it is the worker's and dispatcher's bookkeeping (phases, pump, planner,
 * discovery). Claims here take their candidates from a list read beforehand: no discovery.
 *
 *   npm run bench:path                          # 40,000 jobs per step, 2 rounds, alternated
 *   npm run bench:path -- --jobs 20000 --rounds 3
 *   npm run bench:path -- --steps +callAttempt,scheduler --statements   # and each step's statements
 *
 * See bench/README.md "path ladder".
 */
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../test/helpers/db.ts";
import { seedAuthority } from "../src/store/authority.ts";
import { claimDueIds } from "../src/store/dispatch-queries.ts";
import { migrate } from "../src/store/migrate.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { acquireShards } from "../src/store/shards.ts";
import { completeAttempts, type Completion } from "../src/store/worker-queries.ts";
import type { ClaimRow } from "../src/store/types.ts";
import { deliver } from "../src/worker/deliver.ts";
import { type AttemptDeps, callAttempt } from "../src/worker/attempt-call.ts";
import { CompletionBatcher } from "../src/worker/completion-batcher.ts";
import { laneKey } from "../src/worker/host-lane.ts";
import { HostLimiter } from "../src/worker/host-limiter.ts";
import { PayloadCache } from "../src/worker/payload-cache.ts";
import type { InFlight } from "../src/worker/in-flight.ts";
import { JobAbort } from "../src/worker/job-abort.ts";
import { DbClock } from "../src/time/db-clock.ts";
import { Metrics } from "../src/obs/metrics.ts";
import { createLogger } from "../src/obs/log.ts";
import { loadConfig } from "../src/config.ts";
import { startRuntime } from "../src/runtime.ts";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { insertBurst } from "./lib/burst-jobs.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { procCpuSeconds } from "./lib/scheduler-process.ts";
import { threadCpuSeconds } from "./lib/thread-cpu.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, table } from "./lib/stats.ts";
import { startTargetProcess } from "./lib/target-process.ts";
import { successOf } from "../test/helpers/completion.ts";

const USAGE = "usage: bun bench/path-ladder.ts [--jobs N] [--rounds N] [--concurrency N] [--steps a,b,…] [--statements]   (npm run bench:path -- …)";
const { values } = parseArgs({
  options: {
    jobs: { type: "string" },
    rounds: { type: "string" },
    concurrency: { type: "string" },
    steps: { type: "string" },
    // Each step's top statements (pg_stat_statements): per job, server µs per job, rows a call.
    statements: { type: "boolean" },
    help: { type: "boolean" },
  },
});
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("path-ladder", USAGE, values.help);
const N = flag("jobs", values.jobs, 40_000);
const ROUNDS = flag("rounds", values.rounds, 2);
const CONC = flag("concurrency", values.concurrency, 32);
const CLAIM_BATCH = 250;
const COMPLETE_BATCH = 100;
const say = (s: string) => process.stderr.write(`${s}\n`);

type StepName = "statements" | "+deliver" | "+callAttempt" | "scheduler";
const ALL_STEPS: StepName[] = ["statements", "+deliver", "+callAttempt", "scheduler"];
const STEPS: StepName[] = values.steps ? (values.steps.split(",") as StepName[]) : ALL_STEPS;
for (const s of STEPS) {
  if (!ALL_STEPS.includes(s)) {
    console.error(`path-ladder: no step "${s}" (steps: ${ALL_STEPS.join(", ")})\n${USAGE}`);
    process.exit(2);
  }
}

// The target in its own process, so that this process's CPU is the loop's alone.
const target = await startTargetProcess("path-ladder");
const url = target.url;

interface Figures {
  perSecond: number;
  cpuUsPerJob: number;
  /** Of cpuUsPerJob, this process's JS thread (bench/lib/thread-cpu.ts): steadier than the whole. */
  jsUsPerJob?: number;
  /** The database's backends (this database's connections), undefined when the server is not on this machine. */
  serverUsPerJob?: number;
}

/** CPU seconds so far of each backend connected to the bench's database (the server must run on this machine). */
async function backendCpu(): Promise<Map<number, number>> {
  const rows = (await admin`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`) as unknown as { pid: number }[];
  const out = new Map<number, number>();
  for (const r of rows) {
    const s = procCpuSeconds(Number(r.pid));
    if (s !== undefined) out.set(Number(r.pid), s);
  }
  return out;
}

/** This process's JS thread since `before`, µs per job. */
function jsUs(before: number | undefined): number | undefined {
  const now = threadCpuSeconds(process.pid)?.js;
  return before === undefined || now === undefined ? undefined : ((now - before) / N) * 1e6;
}

/** Backend CPU between two snapshots, µs per job (a backend that started in between counts from zero). */
function serverUs(before: Map<number, number>, after: Map<number, number>): number | undefined {
  if (after.size === 0) return undefined;
  let s = 0;
  for (const [pid, cpu] of after) s += cpu - (before.get(pid) ?? 0);
  return (s / N) * 1e6;
}

const dbUrl = await createDatabase();
const db = openPostgres({ url: dbUrl, maxConnections: 4 });
const admin = postgres(dbUrl, { max: 1, onnotice: () => {} });
const log = createLogger({ level: "warn" });
const metrics = new Metrics();

async function run(step: StepName): Promise<Figures> {
  await db.exec("TRUNCATE jobs, attempts CASCADE");
  await insertBurst(db, N, url, -1000);
  await db.exec("VACUUM ANALYZE jobs");
  await db.exec("VACUUM ANALYZE attempts");
  await db.exec("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name LIKE 'dispatch:%'");
  // The scheduler takes its shards itself (the others' lease on shard 0 lapsed above).
  if (step === "scheduler") return runScheduler();
  const shards = await acquireShards(db, { owner: "bench-dispatcher", shards: [0], ttlMs: 3_600_000, skewMs: 0, region: "local" });
  const fence = { owner: "bench-dispatcher", shards, count: 1, region: "local", generation: 0 };
  const ids = (await db.query<{ id: string }>("SELECT id FROM jobs ORDER BY due_at, id")).map((x) => x.id);
  const owner = "bench-worker";
  const clock = new DbClock();
  const completions = new CompletionBatcher(db, owner, log, metrics);
  const deps: AttemptDeps = {
    db,
    owner,
    log,
    metrics,
    limiter: new HostLimiter<InFlight>({ floorPerSec: 0.5, maxHeld: 200 }),
    payloads: new PayloadCache(db),
    completions,
    allowPrivateTargets: true,
    asyncLeaseMs: 60_000,
    clock,
  };

  // Completions batched by hand for the first two steps (the batcher's statement, no batcher).
  const done: Completion[] = [];
  let flushing = Promise.resolve();
  const flush = async () => {
    const batch = done.splice(0, COMPLETE_BATCH);
    if (batch.length > 0) await completeAttempts(db, owner, batch);
  };
  const record = (j: ClaimRow, status: number, startedAt: Date, finishedAt: Date) => {
    done.push(
      successOf({ job_id: j.id, gen: j.lease_generation, attempt_id: j.attempt_id!, http_status: status, started_at: startedAt, finished_at: finishedAt }),
    );
    if (done.length >= COMPLETE_BATCH) flushing = flushing.then(flush);
  };

  const call = async (j: ClaimRow): Promise<void> => {
    if (step === "statements") {
      const startedAt = new Date();
      const r = await fetch(j.target.url, {
        method: "POST",
        headers: { "content-type": "application/json", "webhook-id": j.id },
        body: j.target.body ?? "",
        redirect: "manual",
      });
      await r.arrayBuffer();
      record(j, r.status, startedAt, new Date());
    } else if (step === "+deliver") {
      const r = await deliver(j, { attemptId: j.attempt_id!, attemptNumber: j.calls, allowPrivateTargets: true });
      record(j, r.httpStatus ?? 0, r.startedAt, r.finishedAt);
    } else {
      const f: InFlight = { job: j, gen: j.lease_generation, abort: new JobAbort(), leaseAt: performance.now(), phase: "calling" };
      deps.limiter.admit(laneKey(j.target.url, j.tenant, j.host_limits), j.id, deps.limiter.limitsOf(j.host_limits), f, Date.now());
      // As the worker does: the call slot frees once the target has answered; the outcome's
      // write (batched) finishes the job after.
      let freed!: () => void;
      const answered = new Promise<void>((r) => (freed = r));
      const recorded = callAttempt(deps, f, j.attempt_id!, j.calls, j.catchup, () => freed());
      pending.add(recorded);
      void recorded.finally(() => pending.delete(recorded));
      await answered;
    }
  };
  const pending = new Set<Promise<void>>();

  const ready: ClaimRow[] = [];
  let next = 0;
  let claiming: Promise<void> | undefined;
  const claimMore = () => {
    if (claiming || next >= ids.length || ready.length >= 2 * CLAIM_BATCH) return;
    const batch = ids.slice(next, next + CLAIM_BATCH);
    next += batch.length;
    claiming = (async () => {
      const got = await claimDueIds(db, {
        fence,
        limit: batch.length,
        token: shards[0]!.epoch,
        ttlMs: 3_600_000,
        worker: owner,
        startLimit: batch.length,
        ids: batch,
        attemptIds: batch.map(() => Bun.randomUUIDv7()),
      });
      if (got.length !== batch.length) throw new Error(`path-ladder: a claim took ${got.length} of ${batch.length}`);
      ready.push(...got);
    })().finally(() => {
      claiming = undefined;
      claimMore();
      launch();
    });
  };
  let inFlight = 0;
  let finished = 0;
  let allDone!: () => void;
  const over = new Promise<void>((r) => (allDone = r));
  const launch = () => {
    while (inFlight < CONC && ready.length > 0) {
      const j = ready.shift()!;
      inFlight++;
      call(j).then(
        () => {
          inFlight--;
          if (++finished === N) allDone();
          claimMore();
          launch();
        },
        (err) => {
          console.error(err);
          process.exit(1);
        },
      );
    }
  };

  const server0 = await backendCpu();
  const js0 = threadCpuSeconds(process.pid)?.js;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  claimMore();
  await over;
  flushing = flushing.then(flush);
  await flushing;
  await Promise.all(pending);
  await completions.drain();
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(cpu0);
  const server1 = await backendCpu();
  const [{ n }] = (await admin`SELECT count(*)::int AS n FROM jobs WHERE status = 'succeeded'`) as unknown as [{ n: number }];
  if (n !== N) throw new Error(`path-ladder: ${n} of ${N} jobs succeeded (${step})`);
  return { perSecond: N / seconds, cpuUsPerJob: (c.user + c.system) / N, jsUsPerJob: jsUs(js0), serverUsPerJob: serverUs(server0, server1) };
}

/**
 * The scheduler's dispatcher and worker in this process (as --mode=all runs them, without the
 * API's traffic): discovery, the planner, the claim handed to the worker, its phases, pump and
 * lease renewer around the same per-call path.
 */
async function runScheduler(): Promise<Figures> {
  const config = loadConfig(
    {
      DATABASE_URL: dbUrl,
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
      WORKER_CONCURRENCY: String(CONC),
    },
    { mode: "all" },
  );
  const server0 = await backendCpu();
  const js0 = threadCpuSeconds(process.pid)?.js;
  const cpu0 = process.cpuUsage();
  const rt = await startRuntime(config, { db, log });
  let server1: Map<number, number>;
  try {
    // Until no job is left to call or finish: two probes of the live-state partial indexes,
    // every 200 ms (the rate comes from the attempts' instants, not from this loop). A count
    // of the succeeded every 20 ms (a scan of the whole table) took a core's tenth from the
    // scheduler it was measuring.
    for (;;) {
      const [{ busy }] = (await admin`SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'scheduled')
        OR EXISTS (SELECT 1 FROM jobs WHERE status IN ('queued', 'running')) AS busy`) as unknown as [{ busy: boolean }];
      if (!busy) break;
      await Bun.sleep(200);
    }
    server1 = await backendCpu();
  } finally {
    await rt.stop();
  }
  const c = process.cpuUsage(cpu0);
  const [{ n }] = (await admin`SELECT count(*)::int AS n FROM jobs WHERE status = 'succeeded'`) as unknown as [{ n: number }];
  if (n !== N) throw new Error(`path-ladder: ${n} of ${N} jobs succeeded (scheduler)`);
  const [{ secs }] = (await admin`SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 AS secs FROM attempts`) as unknown as [
    { secs: number },
  ];
  return { perSecond: N / secs, cpuUsPerJob: (c.user + c.system) / N, jsUsPerJob: jsUs(js0), serverUsPerJob: serverUs(server0, server1) };
}

/** The step's top statements by server time since the reset before it (--statements). */
async function sayStatements(step: StepName): Promise<void> {
  const rows = (await admin`SELECT calls, total_exec_time AS ms, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
    WHERE d.datname = current_database() ORDER BY total_exec_time DESC LIMIT 8`) as unknown as { calls: string; ms: number; rows: string; q: string }[];
  say(`path-ladder: ${step}: statements (per job, server µs per job, rows a call):`);
  for (const r of rows)
    say(
      `  ${(Number(r.calls) / N).toFixed(4)}  ${((r.ms * 1000) / N).toFixed(1).padStart(6)}  ${String(Math.round(Number(r.rows) / Number(r.calls))).padStart(6)}  ${r.q}`,
    );
}

const results = new Map<StepName, Figures[]>(STEPS.map((s) => [s, []]));
try {
  await migrate(db);
  await seedAuthority(db, "local");
  for (let r = 0; r < ROUNDS; r++) {
    // Alternated: each round runs every step once, so a slow moment of the box falls on all.
    for (const step of STEPS) {
      say(`path-ladder: round ${r + 1} of ${ROUNDS}, ${step} (${N} jobs)…`);
      if (values.statements) {
        await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
        await admin`SELECT pg_stat_statements_reset()`;
      }
      results.get(step)!.push(await run(step));
      if (values.statements) await sayStatements(step);
    }
  }
  const server = await describeServer((s) => admin.unsafe(s) as never);
  // Every round's figure, in order: a slow moment of the box shows as one column.
  const range = (xs: number[], digits: number) => xs.map((x) => x.toFixed(digits)).join(" / ");
  process.stdout.write(
    `\npath ladder: ${N} jobs already due per step, ${ROUNDS} rounds alternated, ${CONC} calls in flight, the target in its own process\n\n`,
  );
  process.stdout.write(
    table(
      ["step", "deliveries/s", "process CPU µs/job", "of which JS thread", "backends CPU µs/job"],
      STEPS.map((s) => {
        const fs = results.get(s)!;
        const server = fs.every((f) => f.serverUsPerJob !== undefined)
          ? range(
              fs.map((f) => f.serverUsPerJob!),
              1,
            )
          : "-";
        return [
          s,
          range(
            fs.map((f) => f.perSecond),
            0,
          ),
          range(
            fs.map((f) => f.cpuUsPerJob),
            1,
          ),
          fs.every((f) => f.jsUsPerJob !== undefined)
            ? range(
                fs.map((f) => f.jsUsPerJob!),
                1,
              )
            : "-",
          server,
        ];
      }),
    ),
  );
  process.stdout.write(
    "\nprocess CPU: user + system time of this process (claims, completions, calls; not the target, not the database) / jobs; of which JS thread: its JavaScript thread's alone (/proc/PID/task).\nbackends CPU: the same of the database's backends serving this bench's database (/proc, 10 ms ticks; autovacuum workers that ended are not counted).\n\n",
  );
  process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
} finally {
  target.stop();
  await db.close();
  await admin.end();
  await dropDatabase(dbUrl).catch(() => {});
}
