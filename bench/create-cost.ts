/**
 * What creating a job through POST /v1/jobs/batch costs: jobs/s, and CPU time per job of the
 * scheduler process (`--mode=api` unless --mode says otherwise) and of its PostgreSQL backends,
 * from /proc/PID/stat. CPU per job barely moves when the machine is busy; jobs/s does. Run on
 * the durable server:
 *
 *   bash scripts/with-services.sh bun bench/create-cost.ts [--jobs 50000] [--rounds 3] [--mode api|all]
 *
 * Jobs are made the way bench/peers.ts makes the herd's (bench/lib/create-jobs.ts): 1000 a
 * request, 2 requests in flight, a small JSON body, all due in an hour. One warm-up round of
 * 2000 is left out of the figures. `--mode all` runs the API beside a dispatcher and a worker,
 * as bench:peers runs the scheduler.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { tmpdir } from "node:os";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../test/helpers/db.ts";
import { createJobs } from "./lib/create-jobs.ts";
import { procCpuSeconds, procMemoryBytes, SchedulerProcess } from "./lib/scheduler-process.ts";

const { values } = parseArgs({ options: { jobs: { type: "string" }, rounds: { type: "string" }, mode: { type: "string" } } });
const mode = values.mode ?? "api";
if (mode !== "api" && mode !== "all") {
  console.error(`create-cost: --mode must be api (the API alone, the default) or all (as bench:peers runs it), not ${mode}`);
  process.exit(2);
}
const jobs = Number(values.jobs ?? 50_000);
const rounds = Number(values.rounds ?? 3);
const url = await createDatabase();
const dbName = new URL(url).pathname.slice(1);
const admin = postgres(url, { max: 1, onnotice: () => {} });
const proc = await SchedulerProcess.start({
  databaseUrl: url,
  concurrency: 32,
  logLevel: "warn",
  logFile: join(tmpdir(), `create-cost-${process.pid}.log`),
  mode,
});
try {
  await proc.waitReady(60_000);
  const settings = await admin<
    { name: string; setting: string }[]
  >`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'server_version')`;
  console.log(`create-cost: PostgreSQL ${settings.map((s) => `${s.name}=${s.setting}`).join(" ")}; ${jobs} jobs a round, 1000 a request, 2 in flight`);
  const backends = async () =>
    (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = ${dbName} AND pid <> pg_backend_pid()`).map((r) => r.pid);
  const backendCpu = (pids: number[]) => pids.reduce((s, p) => s + (procCpuSeconds(p) ?? 0), 0);
  const round = async (n: number, tag: string) => {
    const pids = await backends();
    const cpu0 = procCpuSeconds(proc.proc.pid)!;
    const pg0 = backendCpu(pids);
    const started = Date.now();
    await createJobs({
      schedulerUrl: proc.url,
      targetUrl: "http://127.0.0.1:9/hook",
      dueTimes: new Array(n).fill(Date.now() + 3_600_000),
      batch: 1000,
      parallel: 2,
      tag,
    });
    const seconds = (Date.now() - started) / 1000;
    const pids2 = await backends();
    if (pids2.some((p) => !pids.includes(p))) console.log("create-cost: new backends opened during the round; their CPU is not counted");
    return { rate: n / seconds, appUs: ((procCpuSeconds(proc.proc.pid)! - cpu0) / n) * 1e6, pgUs: ((backendCpu(pids) - pg0) / n) * 1e6 };
  };
  await round(2000, "warmup");
  for (let r = 0; r < rounds; r++) {
    const x = await round(jobs, `r${r}`);
    console.log(
      `create-cost: round ${r + 1}: ${x.rate.toFixed(0)} jobs/s; CPU per job: scheduler ${x.appUs.toFixed(1)} µs, PostgreSQL ${x.pgUs.toFixed(1)} µs; scheduler peak RSS ${((procMemoryBytes(proc.proc.pid, "VmHWM") ?? NaN) / 2 ** 20).toFixed(0)} MiB`,
    );
  }
  // Where the memory is, as the process sees it (prom-client's default metrics).
  const metrics = await (await fetch(`${proc.url}/metrics`)).text();
  const mem = metrics
    .split("\n")
    .filter((l) => /^scheduler_process_(nodejs_heap_size_(total|used)_bytes|nodejs_external_memory_bytes|resident_memory_bytes) /.test(l));
  console.log(
    `create-cost: after the rounds: ${mem
      .map((l) => {
        const [k, v] = l.split(" ");
        return `${k.replace("scheduler_process_", "")} ${(Number(v) / 2 ** 20).toFixed(0)} MiB`;
      })
      .join(", ")}`,
  );
} finally {
  await proc.stop().catch(() => proc.kill());
  await admin.end();
  await dropDatabase(url).catch(() => {});
}
