/**
 * How long the schedule generator takes to turn a 9:00 herd of schedules into occurrence jobs.
 * An occurrence is made when its schedule's next_fire_at has come (DueSchedules), so the last
 * of N schedules due at one instant is called at least this long after its nominal time,
 * however fast the dispatcher then delivers. The generator runs alone here (no dispatcher, no
 * calls), pass after pass, as a dispatcher's leader runs it, until nothing is due.
 *
 *   npm run bench:generation -- [--schedules 10000] [--rounds 2] [--overlaps skip,allow,queue] [--batch N]
 *
 * Passes take what the dispatcher's do (100 schedules, then 500 while passes come back full),
 * or --batch N each.
 *
 * Every schedule is hourly, due at the last full hour (within its grace: on time, not a
 * misfire), with one tenant and a small target. Per overlap policy: schedules a second, the
 * database's backend CPU a schedule (/proc/PID/stat of the pool's backends: the server must run
 * on this machine, as `npm run bench:generation` starts it), and this process's (the generator's
 * planning and the driver).
 */
import { parseArgs } from "node:util";
import { SCHEDULE_BACKLOG_BATCH, SCHEDULE_BATCH } from "../src/dispatcher/occurrence-generation.ts";
import { ScheduleGenerator } from "../src/dispatcher/schedule-generator.ts";
import { silentLogger } from "../src/obs/log.ts";
import { Metrics } from "../src/obs/metrics.ts";
import { seedAuthority } from "../src/store/authority.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { createDatabase, dropDatabase, testDatabaseUrl } from "../test/helpers/db.ts";
import { takeShards } from "../test/helpers/shards.ts";
import postgres from "postgres";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { procCpuSeconds } from "./lib/scheduler-process.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, range, table } from "./lib/stats.ts";

const USAGE = "usage: bun bench/generation.ts [--schedules N] [--rounds N] [--overlaps skip,allow,queue] [--batch N]   (npm run bench:generation -- …)";
const { values } = parseArgs({
  options: { schedules: { type: "string" }, rounds: { type: "string" }, overlaps: { type: "string" }, batch: { type: "string" }, help: { type: "boolean" } },
});
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("generation", USAGE, values.help);
const N = flag("schedules", values.schedules, 10_000);
const ROUNDS = flag("rounds", values.rounds, 2);
const BATCH = values.batch === undefined ? undefined : flag("batch", values.batch, SCHEDULE_BATCH);
const OVERLAPS = ["skip", "allow", "queue"] as const;
type Overlap = (typeof OVERLAPS)[number];
const overlaps = (values.overlaps ?? OVERLAPS.join(",")).split(",").map((o) => o.trim()) as Overlap[];
for (const o of overlaps)
  if (!OVERLAPS.includes(o)) {
    console.error(`generation: --overlaps takes ${OVERLAPS.join(", ")} (comma-separated), not ${JSON.stringify(o)}\n${USAGE}`);
    process.exit(2);
  }

const say = (s: string) => process.stderr.write(`${s}\n`);

/** Busy CPU of one process, seconds (10 ms ticks); 0 once it is gone. */
const cpuSeconds = (pid: number) => procCpuSeconds(pid) ?? 0;

interface Result {
  overlap: Overlap;
  perSec: number;
  seconds: number;
  backendUs: number;
  processUs: number;
}

async function round(overlap: Overlap): Promise<Result> {
  const url = await createDatabase({ migrated: true });
  // One connection: its backend is all the generator's database work.
  const db = openPostgres({ url, maxConnections: 1 });
  try {
    await seedAuthority(db, "local");
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    await db.query(
      `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                              misfire, misfire_grace_ms, catchup_window_ms, overlap, next_fire_at)
       SELECT 'default', 's' || g, '0 * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}',
              3, 1000, 60000, 5000, 'skip', 7200000, 86400000, $2, $1
       FROM generate_series(1, ${N}) g`,
      [new Date(hour), overlap],
    );
    await db.exec("VACUUM ANALYZE schedules");
    const generator = new ScheduleGenerator({ db, batch: BATCH ?? SCHEDULE_BATCH, catchupPerSecond: 1000, log: silentLogger, metrics: new Metrics() });
    const fence = await takeShards(db, "bench");
    const pids = (await db.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")).map((r) => r.pid);
    const cpu0 = pids.reduce((s, p) => s + cpuSeconds(p), 0);
    const own0 = process.cpuUsage();
    const t0 = performance.now();
    let made = 0;
    // As the dispatcher sizes its passes (or --batch each).
    let batch = BATCH ?? SCHEDULE_BATCH;
    for (let n = await generator.runOnce(fence, batch); n > 0; n = await generator.runOnce(fence, batch)) {
      made += n;
      if (BATCH === undefined) batch = n === batch ? SCHEDULE_BACKLOG_BATCH : SCHEDULE_BATCH;
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpu = pids.reduce((s, p) => s + cpuSeconds(p), 0) - cpu0;
    const own = process.cpuUsage(own0);
    const [{ jobs }] = await db.query<{ jobs: string }>("SELECT count(*)::text AS jobs FROM jobs");
    if (made !== N || Number(jobs) !== N) throw new Error(`generation: ${made} schedules generated, ${jobs} jobs, of ${N}`);
    return { overlap, perSec: N / seconds, seconds, backendUs: (cpu * 1e6) / N, processUs: (own.user + own.system) / N };
  } finally {
    await db.close();
    await dropDatabase(url).catch(() => {});
  }
}

const results: Result[] = [];
for (let r = 1; r <= ROUNDS; r++)
  for (const overlap of overlaps) {
    say(`generation: round ${r} of ${ROUNDS}, overlap ${overlap} (${N} schedules)…`);
    results.push(await round(overlap));
  }

const admin = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
const server = await describeServer((s) => admin.unsafe(s) as never);
await admin.end();
const passes =
  BATCH === undefined ? `passes of ${SCHEDULE_BATCH}, then ${SCHEDULE_BACKLOG_BATCH} while full (as the dispatcher's)` : `${BATCH} schedules a pass`;
process.stdout.write(`\ngeneration: ${N} schedules due at one instant, ${ROUNDS} rounds alternated, ${passes}, one generator\n\n`);
process.stdout.write(
  table(
    ["overlap", "schedules/s", "all made after, s", "backend CPU µs/schedule", "process CPU µs/schedule"],
    overlaps.map((o) => {
      const rs = results.filter((r) => r.overlap === o);
      return [
        o,
        range(
          rs.map((r) => r.perSec),
          0,
        ),
        range(
          rs.map((r) => r.seconds),
          2,
        ),
        range(
          rs.map((r) => r.backendUs),
          0,
        ),
        range(
          rs.map((r) => r.processUs),
          0,
        ),
      ];
    }),
  ),
);
process.stdout.write(
  "\nall made after: the first pass's start → the end of the pass that made the last occurrence (when the passes start at the herd's instant, how late\n  its last occurrence is made; its call comes later still).\nbackend CPU: user + system time of the generator's connections' backends (/proc/PID/stat, 10 ms ticks) / schedules.\nprocess CPU: this process's user + system time (the generator's planning, postgres.js) / schedules.\n\n",
);
process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
