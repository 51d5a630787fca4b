#!/usr/bin/env bun
/**
 * Sharded dispatch: how fast N due jobs drain with 1, 2 and 3 scheduler processes sharing the
 * shards (each process --mode=all: it dispatches its shards to its own workers, the way a
 * deployment scales out). The jobs are written straight into the jobs table, all due at one
 * instant a few seconds ahead, once the processes have evened out the shards; the figure is
 * jobs per second from that instant until the last one succeeded.
 *
 *   npm run bench:shards                    # 20000 jobs, 1..3 processes, throwaway PostgreSQL
 *   npm run bench:shards -- --jobs 50000 --max 4
 *
 * A 2-core machine is CPU-bound with one process already: more processes there share the
 * same two cores. See bench/README.md.
 */
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { UsageError, whole } from "./lib/args.ts";
import { benchHarness } from "./lib/harness.ts";
import { describeMachine } from "./lib/machine.ts";
import { describeServer, settingsLine } from "./lib/server.ts";
import { SchedulerProcess } from "./lib/scheduler-process.ts";
import { table } from "./lib/stats.ts";
import { RecordingTarget } from "./lib/target.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);
const progress = process.stderr.isTTY ? say : undefined;

const USAGE = `usage: bun bench/shards.ts [options]     (npm run bench:shards -- [options])

  --jobs N          jobs due at one instant, per run (20000)
  --max N           runs with 1..N processes (3)
  --shards N        SCHEDULER_SHARDS (16)
  --concurrency N   WORKER_CONCURRENCY per process (200)
  -h, --help
Needs PostgreSQL: DATABASE_URL or TEST_DATABASE_URL (npm run bench:shards starts one).`;

interface RunFigures {
  processes: number;
  jobs: number;
  drainS: number;
  perSec: number;
  firstCallMs: number;
  spread: string;
  cpuS: number;
}

async function main(): Promise<number> {
  let a;
  try {
    const { values } = parseArgs({
      options: {
        jobs: { type: "string" },
        max: { type: "string" },
        shards: { type: "string" },
        concurrency: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
    if (values.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    a = {
      jobs: values.jobs ? whole("--jobs", values.jobs, 1, 1_000_000) : 20_000,
      max: values.max ? whole("--max", values.max, 1, 8) : 3,
      shards: values.shards ? whole("--shards", values.shards, 1, 1024) : 16,
      concurrency: values.concurrency ? whole("--concurrency", values.concurrency, 1, 10_000) : 200,
    };
  } catch (err) {
    if (err instanceof UsageError || err instanceof TypeError) {
      say(`bench: ${(err as Error).message}\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!process.env.DATABASE_URL && !process.env.TEST_DATABASE_URL) {
    say("bench: sharded dispatch needs PostgreSQL (several processes share one database); set DATABASE_URL, or run npm run bench:shards");
    return 2;
  }
  const target = new RecordingTarget();
  const rows: RunFigures[] = [];
  let machine = "";
  for (let k = 1; k <= a.max; k++) {
    const h = benchHarness(say);
    const db0 = await h.database(`shards${k}`);
    const db = openPostgres({ url: db0.dbUrl!, maxConnections: 4 });
    const logFile = join(tmpdir(), `scheduler-bench-shards-${k}.log`);
    rmSync(logFile, { force: true });
    const procs: SchedulerProcess[] = [];
    h.onCleanup(async () => {
      for (const p of procs) await p.stop().catch(() => p.kill());
      await db.close();
    });
    try {
      const env = { SCHEDULER_SHARDS: String(a.shards), SCHEDULER_POLL_INTERVAL: "200ms", SCHEDULER_LEADER_TTL: "3s" };
      // The first migrates; the others start once it has.
      const first = await SchedulerProcess.start({ databaseUrl: db0.dbUrl, concurrency: a.concurrency, logLevel: "warn", logFile, env });
      procs.push(first);
      await first.waitReady();
      for (let i = 1; i < k; i++)
        procs.push(await SchedulerProcess.start({ databaseUrl: db0.dbUrl, concurrency: a.concurrency, logLevel: "warn", logFile, env }));
      for (const p of procs) await p.waitReady();
      // Wait until the shards are spread over all k processes.
      const end = Date.now() + 30_000;
      for (;;) {
        const c = (await (await fetch(`${first.url}/v1/cluster`)).json()) as { shard_owners: Record<string, number> };
        const owners = Object.values(c.shard_owners);
        if (owners.length === k && owners.reduce((x, y) => x + y, 0) === a.shards) break;
        if (Date.now() > end) throw new Error(`the shards did not spread over ${k} processes: ${JSON.stringify(c.shard_owners)}`);
        await Bun.sleep(200);
      }
      const spread = Object.values(((await (await fetch(`${first.url}/v1/cluster`)).json()) as { shard_owners: Record<string, number> }).shard_owners)
        .sort((x, y) => y - x)
        .join("/");
      const cpu0 = procs.reduce((s, p) => s + (p.cpuSeconds() ?? 0), 0);
      const due = Date.now() + 3000;
      progress?.(`bench: ${k} process(es), shards ${spread}: writing ${a.jobs} jobs due at one instant`);
      await db.query(
        `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
         SELECT gen_random_uuid(), 'bench', 'scheduled', $1, $1,
           jsonb_build_object('url', $2::text || '/j', 'method', 'POST', 'headers', '{}'::jsonb, 'body', null, 'json', false), 3, 1000, 60000, 30000
         FROM generate_series(1, $3::int)`,
        [new Date(due), target.url, a.jobs],
      );
      let done = 0;
      while (done < a.jobs) {
        await Bun.sleep(250);
        for (const p of procs) p.assertAlive();
        done = Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE status = 'succeeded'"))[0]!.n);
        if (Date.now() - due > 600_000) throw new Error(`only ${done} of ${a.jobs} succeeded in 10 minutes`);
        progress?.(`bench: ${done}/${a.jobs}`);
      }
      const [t] = await db.query<{ first: Date; last: Date }>("SELECT min(a.started_at) AS first, max(a.finished_at) AS last FROM attempts a");
      const drainS = (t!.last.getTime() - due) / 1000;
      rows.push({
        processes: k,
        jobs: a.jobs,
        drainS,
        perSec: a.jobs / drainS,
        firstCallMs: t!.first.getTime() - due,
        spread,
        cpuS: procs.reduce((s, p) => s + (p.cpuSeconds() ?? 0), 0) - cpu0,
      });
      if (!machine) {
        const server = await describeServer((q) => db.query(q));
        machine = JSON.stringify({ ...describeMachine(server.version, "postgres.js"), settings: settingsLine(server) });
      }
    } finally {
      await h.cleanup();
    }
  }
  target.stop();
  const m = JSON.parse(machine);
  process.stdout.write(
    `\nsharded dispatch: ${a.jobs} jobs due at one instant, SCHEDULER_SHARDS=${a.shards}, WORKER_CONCURRENCY=${a.concurrency} per process\n`,
  );
  process.stdout.write(`machine: ${m.cpu}, ${m.cores} cores, ${m.memory}; ${m.os}; Bun ${m.bun}\n`);
  process.stdout.write(`postgres: ${m.postgres}\npg settings: ${m.settings}\n\n`);
  process.stdout.write(
    `${table(
      ["processes", "shards held", "jobs", "first call (ms after due)", "drained in (s)", "jobs/s", "scheduler CPU (s)"],
      rows.map((r) => [String(r.processes), r.spread, String(r.jobs), String(r.firstCallMs), r.drainS.toFixed(2), r.perSec.toFixed(0), r.cpuS.toFixed(1)]),
    )}\n`,
  );
  return 0;
}

process.exit(await main());
