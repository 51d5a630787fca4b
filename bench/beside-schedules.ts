/**
 * A burst of one-off jobs while schedules fire: what the schedules cost the burst. Each round
 * runs the same burst on a fresh database, once beside `--schedules N` schedules that fire
 * every 10 s at staggered seconds (with 5, one fires every 2 s: generation always has one due
 * soon) and once beside none, alternated. Per round: deliveries a second, commits and
 * statements a delivered job (pg_stat_database, pg_stat_statements; BEGIN and COMMIT are the
 * commits, not statements), and the generation passes (DueSchedules statements) a second.
 *
 *   npm run bench:beside-schedules -- [--jobs 20000] [--schedules 5] [--rounds 3]
 *
 * One `--mode=all` scheduler, 32 calls in flight, the bench's own loopback target, the durable
 * throwaway server by default (bench/README.md, "The server they run on").
 */
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createDatabase, dropDatabase, testDatabaseUrl } from "../test/helpers/db.ts";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { createJobs } from "./lib/create-jobs.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { SchedulerProcess } from "./lib/scheduler-process.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, table } from "./lib/stats.ts";
import { costBetween, PgCost } from "./peers/pg-cost.ts";

const USAGE = "usage: bun bench/beside-schedules.ts [--jobs N] [--schedules N] [--rounds N]   (npm run bench:beside-schedules -- …)";
const { values } = parseArgs({ options: { jobs: { type: "string" }, schedules: { type: "string" }, rounds: { type: "string" }, help: { type: "boolean" } } });
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("beside-schedules", USAGE, values.help);
const N = flag("jobs", values.jobs, 20_000);
const SCHEDULES = flag("schedules", values.schedules, 5);
const ROUNDS = flag("rounds", values.rounds, 3);
const say = (s: string) => process.stderr.write(`${s}\n`);

let calls: number[] = [];
const target = Bun.serve({
  port: 0,
  fetch(req) {
    if (!req.url.endsWith("/s")) calls.push(performance.now());
    return new Response("ok");
  },
});
const admin = testDatabaseUrl();
const cost = new PgCost(admin);
if (!(await cost.hasStatements())) say("beside-schedules: pg_stat_statements is not loaded: no statement figures");
const logFile = join(tmpdir(), `beside-schedules-${process.pid}.log`);

interface Round {
  schedules: number;
  perSecond: number;
  commitsPerJob: number;
  statementsPerJob?: number;
  /** DueSchedules statements from the delivering process's start to its stop. */
  passes?: number;
  /** The statements that ran most, per delivered job, with their first line. */
  top?: { query: string; perJob: number }[];
}

async function round(schedules: number): Promise<Round> {
  const url = await createDatabase();
  const db = new URL(url).pathname.slice(1);
  calls = [];
  try {
    // An API-only process makes the schedules and the burst, and stops: the burst is all due when delivery starts.
    const api = await SchedulerProcess.start({ databaseUrl: url, concurrency: 32, logLevel: "warn", logFile, mode: "api" });
    try {
      await api.waitReady(60_000);
      for (let i = 0; i < schedules; i++) {
        const body = { id: `beside-${i}`, cron: `${(i * 2) % 10}-59/10 * * * * *`, timezone: "UTC", target: { url: `http://127.0.0.1:${target.port}/s` } };
        const r = await fetch(`${api.url}/v1/schedules`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
        if (r.status !== 201) throw new Error(`POST /v1/schedules answered ${r.status}: ${await r.text()}`);
      }
      await createJobs({
        schedulerUrl: api.url,
        targetUrl: `http://127.0.0.1:${target.port}/hook`,
        dueTimes: new Array(N).fill(Date.now()),
        batch: 1000,
        parallel: 2,
        tag: "b",
      });
    } finally {
      await api.stop();
    }
    await cost.quiet(db);
    const before = await cost.snapshot(db, true);
    const all = await SchedulerProcess.start({ databaseUrl: url, concurrency: 32, logLevel: "warn", logFile, mode: "all" });
    try {
      await all.waitReady(60_000);
      const deadline = performance.now() + 300_000;
      while (calls.length < N && performance.now() < deadline) {
        all.assertAlive();
        await Bun.sleep(20);
      }
      if (calls.length < N) throw new Error(`beside-schedules: ${calls.length} of ${N} jobs called in 300 s`);
    } finally {
      await all.stop();
    }
    await cost.quiet(db);
    const after = await cost.snapshot(db, true);
    const c = costBetween(before, after);
    const seconds = (calls[N - 1]! - calls[0]!) / 1000;
    let passes: number | undefined;
    for (const [query, n] of after.statements ?? []) if (/^-- Due schedules/.test(query)) passes = (passes ?? 0) + n - (before.statements?.get(query) ?? 0);
    return {
      schedules,
      perSecond: N / seconds,
      commitsPerJob: c.commits / N,
      statementsPerJob: c.statements === undefined ? undefined : c.statements / N,
      passes: after.statements ? (passes ?? 0) : undefined,
      top: c.top?.slice(0, 6).map((t) => ({ query: t.query.replace(/\s+/g, " ").slice(0, 100), perJob: t.calls / N })),
    };
  } finally {
    await dropDatabase(url).catch(() => {});
  }
}

const results: Round[] = [];
try {
  for (let r = 0; r < ROUNDS; r++)
    for (const s of r % 2 === 0 ? [SCHEDULES, 0] : [0, SCHEDULES]) {
      say(`beside-schedules: round ${r + 1} of ${ROUNDS}, ${N} jobs beside ${s} schedules`);
      results.push(await round(s));
    }
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  const server = await describeServer((q) => sql.unsafe(q) as never);
  await sql.end();
  process.stdout.write(`\nbeside-schedules: a burst of ${N} jobs, 32 calls in flight, beside schedules firing every 10 s at staggered seconds\n\n`);
  process.stdout.write(
    table(
      ["schedules", "deliveries/s", "commits / job", "statements / job", "generation passes"],
      results.map((r) => [
        String(r.schedules),
        r.perSecond.toFixed(0),
        r.commitsPerJob.toFixed(3),
        r.statementsPerJob?.toFixed(3) ?? "-",
        r.passes === undefined ? "-" : String(r.passes),
      ]),
    ),
  );
  process.stdout.write("\ngeneration passes: DueSchedules statements from the delivering process's start to its stop.\n");
  for (const s of [SCHEDULES, 0]) {
    const last = results.filter((r) => r.schedules === s).at(-1);
    if (!last?.top) continue;
    process.stdout.write(`\nstatements a job, the last round beside ${s} schedules:\n`);
    for (const t of last.top) process.stdout.write(`  ${t.perJob.toFixed(4)}  ${t.query}\n`);
  }
  process.stdout.write("\n");
  process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
} finally {
  target.stop(true);
  await cost.close();
}
