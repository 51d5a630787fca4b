/**
 * What an idle scheduler costs: a `--mode=all` process with no job and no schedule, after it
 * settled, measured over a window. Per second: the statements it sends (pg_stat_statements,
 * without BEGIN and COMMIT), its transactions (pg_stat_database: every statement outside a
 * transaction is one; a backend reports them lazily, within a second while it is busy, within
 * ten when idle, so a short window can miss a few), the WAL the server writes, the CPU
 * of the process and of its database backends; and its resident memory at rest. Once on SQL
 * alone, once with the Redis due index (when the bench has a Redis server).
 *
 *   npm run bench:idle -- [--seconds 30] [--settle 5]
 *
 * The durable throwaway server by default (bench/README.md, "The server they run on"); no
 * other system runs meanwhile, so the server's WAL is the scheduler's.
 */
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createDatabase, dropDatabase, testDatabaseUrl } from "../test/helpers/db.ts";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { procCpuSeconds, procMemoryBytes, SchedulerProcess } from "./lib/scheduler-process.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, table } from "./lib/stats.ts";
import { costBetween, PgCost } from "./peers/pg-cost.ts";

const USAGE = "usage: bun bench/idle-cost.ts [--seconds N] [--settle N]   (npm run bench:idle -- …)";
const { values } = parseArgs({ options: { seconds: { type: "string" }, settle: { type: "string" }, help: { type: "boolean" } } });
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("idle-cost", USAGE, values.help);
const SECONDS = flag("seconds", values.seconds, 30);
const SETTLE = flag("settle", values.settle, 5);
const say = (s: string) => process.stderr.write(`${s}\n`);

const admin = testDatabaseUrl();
const cost = new PgCost(admin);
const hasStatements = await cost.hasStatements();
if (!hasStatements) say("idle-cost: pg_stat_statements is not loaded: no statement figures");
const redisUrl = process.env.TEST_REDIS_URL ?? process.env.REDIS_URL;
const logFile = join(tmpdir(), `idle-cost-${process.pid}.log`);
const sql = postgres(admin, { max: 1, onnotice: () => {} });

interface Figures {
  config: string;
  statements?: number;
  transactions: number;
  walBytes?: number;
  processCpuMs: number;
  backendCpuMs: number;
  rssMiB: number;
  top?: { query: string; perSecond: number }[];
}

async function measure(config: string, env: Record<string, string>): Promise<Figures> {
  const url = await createDatabase();
  const db = new URL(url).pathname.slice(1);
  try {
    const proc = await SchedulerProcess.start({ databaseUrl: url, concurrency: 32, logLevel: "warn", logFile, mode: "all", env });
    try {
      await proc.waitReady(60_000);
      for (let s = SETTLE; s > 0; s--) {
        say(`idle-cost: ${config}: settling, ${s} s left`);
        await Bun.sleep(1000);
      }
      const backends = async () =>
        (await sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = ${db} AND pid <> pg_backend_pid()`).map((r) => r.pid);
      const backendCpu = (pids: number[]) => pids.reduce((sum, p) => sum + (procCpuSeconds(p) ?? 0), 0);
      const pids = await backends();
      const before = await cost.snapshot(db, hasStatements);
      const cpu0 = procCpuSeconds(proc.proc.pid)!;
      const pg0 = backendCpu(pids);
      const t0 = performance.now();
      for (let s = SECONDS; s > 0; s -= 5) {
        say(`idle-cost: ${config}: measuring, ${s} s left`);
        await Bun.sleep(Math.min(5, s) * 1000);
        proc.assertAlive();
      }
      const seconds = (performance.now() - t0) / 1000;
      const cpu1 = procCpuSeconds(proc.proc.pid)!;
      // Backends that came and went inside the window are not counted: the pool keeps its connections.
      const pg1 = backendCpu(pids);
      const after = await cost.snapshot(db, hasStatements);
      const rss = procMemoryBytes(proc.proc.pid, "VmRSS") ?? 0;
      const c = costBetween(before, after);
      return {
        config,
        processCpuMs: ((cpu1 - cpu0) * 1000) / seconds,
        backendCpuMs: ((pg1 - pg0) * 1000) / seconds,
        rssMiB: rss / 2 ** 20,
        transactions: (c.commits + c.rollbacks) / seconds,
        walBytes: c.walBytes === undefined ? undefined : c.walBytes / seconds,
        statements: c.statements === undefined ? undefined : c.statements / seconds,
        top: c.top?.map((t) => ({ query: t.query.replace(/\s+/g, " ").slice(0, 100), perSecond: t.calls / seconds })),
      };
    } finally {
      await proc.stop();
    }
  } finally {
    await dropDatabase(url).catch(() => {});
  }
}

const results: Figures[] = [];
try {
  results.push(await measure("SQL alone", {}));
  if (redisUrl) results.push(await measure("with the Redis index", { REDIS_URL: redisUrl }));
  else say("idle-cost: no TEST_REDIS_URL or REDIS_URL: the Redis index is not measured");
  const server = await describeServer((q) => sql.unsafe(q) as never);
  const fmt = (x: number | undefined, d = 1) => (x === undefined ? "-" : x.toFixed(d));
  process.stdout.write(`\nidle-cost: one --mode=all scheduler, no job, no schedule, ${SECONDS} s after ${SETTLE} s of settling\n\n`);
  process.stdout.write(
    table(
      ["config", "statements/s", "transactions/s", "WAL bytes/s", "process CPU ms/s", "backends CPU ms/s", "RSS MiB"],
      results.map((r) => [r.config, fmt(r.statements), fmt(r.transactions), fmt(r.walBytes, 0), fmt(r.processCpuMs), fmt(r.backendCpuMs), r.rssMiB.toFixed(0)]),
    ),
  );
  process.stdout.write(
    "\nstatements: pg_stat_statements calls without transaction control; transactions: pg_stat_database commits and rollbacks. CPU: /proc, ms of CPU a second (10 ms ticks).\n",
  );
  for (const r of results) {
    if (!r.top) continue;
    process.stdout.write(`\nstatements a second, ${r.config}:\n`);
    for (const t of r.top) process.stdout.write(`  ${t.perSecond.toFixed(2).padStart(6)}  ${t.query}\n`);
  }
  process.stdout.write("\n");
  process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
} finally {
  await sql.end();
  await cost.close();
}
