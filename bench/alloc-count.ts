#!/usr/bin/env bun
/**
 * What one call allocates: the JavaScript heap cells made per call, by type, for each layer
 * of the worker's per-call path. A count, not a time: it gives the same figures on a quiet box
 * and a noisy one, so a change that makes less garbage shows as such where timing cannot tell
 * (bench/README.md part 30). Garbage is paid later, by the collector: its pauses on the JS
 * thread and its marking on the helper threads.
 *
 *   fetch          a bare fetch of the job's URL and body, the answer read whole
 *   deliver        deliver(): the webhook headers, the call's limit, the pinned target, the result
 *   callAttempt    callAttempt(): metrics, the host limiter, the decision, the outcome handed to
 *                  the completion batcher (its push here a resolved promise: no statement)
 *   claimed rows   a claim's 31 columns decoded by the driver, per row (with a database only)
 *   scheduler      the dispatcher and worker in one process (--mode=all without the API's
 *                  traffic) delivering a burst, per job: discovery, claims, the worker's
 *                  phases, calls, completions, and whatever else ran meanwhile (with a
 *                  database only)
 *
 * Each layer runs in a child process whose collector is told to wait (a heap allowed to grow
 * by gigabytes), so that every cell made between the two counts is still there to be counted;
 * a collection during the count would hide some, and the figures are refused when one ran.
 *
 *   npm run bench:alloc
 *   npm run bench:alloc -- --calls 1000 --signed
 */
import { writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { heapStats } from "bun:jsc";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { insertBurst } from "./lib/burst-jobs.ts";
import { cpuModel, osName } from "./lib/machine.ts";
import { table } from "./lib/stats.ts";
import { startTargetProcess } from "./lib/target-process.ts";

const USAGE = "usage: bun bench/alloc-count.ts [--calls N] [--signed]   (npm run bench:alloc -- …)";
const { values } = parseArgs({
  options: {
    calls: { type: "string" },
    signed: { type: "boolean" },
    child: { type: "string" },
    url: { type: "string" },
    help: { type: "boolean" },
  },
});
const flag = wholeFlagsOrExit("alloc-count", USAGE, values.help);
const CALLS = flag("calls", values.calls, 1500);
const WARM = 500;
const ROWS_A_STATEMENT = 100;
const LAYERS = ["fetch", "deliver", "callAttempt", "claimed rows", "scheduler"] as const;
type Layer = (typeof LAYERS)[number];
// The collector waits: a minimum heap of 8 GB before the first collection, on a machine it is
// told has 64 GiB, and Bun's timer that collects an idle or growing heap is off.
const QUIET_GC = { BUN_JSC_forceRAMSize: "68719476736", BUN_JSC_largeHeapSize: "8000000000", BUN_GC_TIMER_DISABLE: "1", BUN_JSC_logGC: "1" };
const DB_URL = process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL;

interface Count {
  layer: Layer;
  calls: number;
  perCall: Record<string, number>;
}

if (values.child) await child(values.child as Layer, values.url!);
else await parent();

async function parent(): Promise<void> {
  const target = await startTargetProcess("alloc-count");
  const counts: Count[] = [];
  try {
    for (const layer of LAYERS) {
      if ((layer === "claimed rows" || layer === "scheduler") && !DB_URL) continue;
      process.stderr.write(`alloc-count: ${layer} (${CALLS} calls)…\n`);
      const args = ["--child", layer, "--url", target.url, "--calls", String(CALLS), ...(values.signed ? ["--signed"] : [])];
      const proc = Bun.spawn([process.execPath, import.meta.path, ...args], {
        // The scheduler layer makes its database where tests make theirs (test/helpers/db.ts).
        env: { ...process.env, ...QUIET_GC, ...(DB_URL ? { TEST_DATABASE_URL: DB_URL } : {}) },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      if (code !== 0) throw new Error(`the ${layer} child exited with ${code}:\n${err.slice(-2000)}`);
      // JavaScriptCore's log (BUN_JSC_logGC): a collection that started between the counts.
      const start = err.indexOf("count: start");
      const end = err.indexOf("count: end");
      if (start < 0 || end < start) throw new Error(`the ${layer} child did not mark its count:\n${err.slice(-2000)}`);
      const during = err.slice(start, end);
      const collections = (during.match(/: START /g) ?? []).length;
      if (collections > 0) throw new Error(`${collections} collection(s) ran during the ${layer} count: its figures would miss cells; run with fewer --calls`);
      counts.push(JSON.parse(out.trim().split("\n").pop()!) as Count);
    }
  } finally {
    target.stop();
  }
  print(counts);
}

function print(counts: Count[]): void {
  const total = (c: Count) => Object.values(c.perCall).reduce((a, b) => a + b, 0);
  const types = [...new Set(counts.flatMap((c) => Object.keys(c.perCall)))]
    .map((t) => ({ t, max: Math.max(...counts.map((c) => c.perCall[t] ?? 0)) }))
    .filter((x) => x.max >= 0.05)
    .sort((a, b) => b.max - a.max)
    .map((x) => x.t);
  const cell = (n: number | undefined) => (n === undefined || n < 0.05 ? "-" : n.toFixed(n >= 10 ? 0 : 1));
  console.log(
    `\nheap cells made per call (per row for claimed rows), ${CALLS} counted after ${WARM} to warm up, no collection in between${values.signed ? "; calls signed" : "; calls unsigned"}\n`,
  );
  console.log(
    table(
      ["type", ...counts.map((c) => c.layer)],
      [...types.map((t) => [t, ...counts.map((c) => cell(c.perCall[t]))]), ["all", ...counts.map((c) => total(c).toFixed(1))]],
    ),
  );
  console.log(
    "\nEach layer includes the ones above it except claimed rows; scheduler is a whole process per job (claims, rows, calls, completions, its loops meanwhile).\nStructure and code cells are the engine's own (shapes, JIT), not a call's.",
  );
  console.log(
    `\ncpu  ${cpuModel()}\nos   ${osName()}\nbun  ${Bun.version} (${Bun.revision.slice(0, 9)})\ndb   ${DB_URL ? "PostgreSQL at DATABASE_URL (claimed rows, scheduler)" : "none (claimed rows and scheduler not counted: no DATABASE_URL)"}`,
  );
}

async function child(layer: Layer, url: string): Promise<void> {
  if (layer === "scheduler") return schedulerCount(url);
  const op = await layerOp(layer, url);
  // Claimed rows come 100 a statement: as many rows as the other layers make calls.
  const per = layer === "claimed rows" ? ROWS_A_STATEMENT : 1;
  for (let i = 0; i < Math.ceil(WARM / per); i++) await op();
  Bun.gc(true);
  const before = heapStats().objectTypeCounts;
  // Straight to fd 2, unbuffered, as JavaScriptCore writes its collection log: each
  // collection lands on its side of the marks.
  writeSync(2, "count: start\n");
  let units = 0;
  for (let i = 0; i < Math.ceil(CALLS / per); i++) units += await op();
  writeSync(2, "count: end\n");
  const after = heapStats().objectTypeCounts;
  report(layer, units, before, after);
}

function report(layer: Layer, units: number, before: Record<string, number>, after: Record<string, number>): never {
  const perCall: Record<string, number> = {};
  for (const [t, n] of Object.entries(after)) {
    const d = n - (before[t] ?? 0);
    if (d > 0) perCall[t] = d / units;
  }
  console.log(JSON.stringify({ layer, calls: units, perCall } satisfies Count));
  process.exit(0);
}

/**
 * A burst through the scheduler's own runtime in this process: WARM jobs first (the code
 * compiled, the pools open), then CALLS jobs inserted due a moment later, counted from before
 * they are due until none is left to call or finish.
 */
async function schedulerCount(url: string): Promise<void> {
  const { createDatabase, dropDatabase } = await import("../test/helpers/db.ts");
  const { openPostgres } = await import("../src/store/postgres-driver.ts");
  const { seedAuthority } = await import("../src/store/authority.ts");
  const { loadConfig } = await import("../src/config.ts");
  const { startRuntime } = await import("../src/runtime.ts");
  const { createLogger } = await import("../src/obs/log.ts");
  const dbUrl = await createDatabase({ migrated: true });
  const db = openPostgres({ url: dbUrl, maxConnections: 4 });
  await seedAuthority(db, "local");
  const config = loadConfig(
    { DATABASE_URL: dbUrl, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "warn", SCHEDULER_ALLOW_PRIVATE_TARGETS: "1", WORKER_CONCURRENCY: "32" },
    { mode: "all" },
  );
  const rt = await startRuntime(config, { db, log: createLogger({ level: "warn" }) });
  // Every 100 ms: two probes of the live-state partial indexes (a few cells each).
  const drained = async () => {
    for (;;) {
      const [{ busy }] = await db.query<{ busy: boolean }>(
        "SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'scheduled') OR EXISTS (SELECT 1 FROM jobs WHERE status IN ('queued', 'running')) AS busy",
      );
      if (!busy) return;
      await Bun.sleep(100);
    }
  };
  let units = 0;
  try {
    await insertBurst(db, WARM, url, 0);
    await drained();
    await insertBurst(db, CALLS, url, 500);
    Bun.gc(true);
    const before = heapStats().objectTypeCounts;
    writeSync(2, "count: start\n");
    await drained();
    writeSync(2, "count: end\n");
    const after = heapStats().objectTypeCounts;
    const [{ n }] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'succeeded'");
    units = n - WARM;
    if (units !== CALLS) throw new Error(`${units} of ${CALLS} jobs succeeded`);
    await rt.stop();
    await db.close();
    await dropDatabase(dbUrl);
    report("scheduler", units, before, after);
  } catch (err) {
    await rt.stop().catch(() => {});
    await db.close().catch(() => {});
    await dropDatabase(dbUrl).catch(() => {});
    throw err;
  }
}

/** One call of the layer; resolves to how many units it counted (rows for claimed rows). */
async function layerOp(layer: Layer, url: string): Promise<() => Promise<number>> {
  const { deliver } = await import("../src/worker/deliver.ts");
  const { JobAbort } = await import("../src/worker/job-abort.ts");
  const key = values.signed ? [new Uint8Array(32).fill(7)] : undefined;
  const job = {
    id: crypto.randomUUID(),
    tenant: "bench",
    status: "running",
    due_at: new Date(),
    scheduled_for: new Date(),
    priority: 0,
    version: 1,
    calls: 1,
    tries: 0,
    idempotency_key: null,
    schedule_id: null,
    nominal_time: null,
    target: { url, method: "POST", headers: {}, body: '{"k":"1","due":1764690000000}', json: true },
    max_attempts: 3,
    backoff_base_ms: 1000,
    backoff_max_ms: 60000,
    timeout_ms: 30000,
    expires_at: null,
    async: false,
    cancel_requested: false,
    throttle_until: null,
    epoch: 4294967296,
    queued_at: new Date(),
    lease_generation: 1,
    host_limits: null,
    verify_url: null,
    lease_key: crypto.randomUUID(),
    checkpoint: null,
    slot: 5,
    catchup: false,
  } as const;
  type Job = import("../src/store/types.ts").ClaimedJob;
  switch (layer) {
    case "fetch":
      return async () => {
        const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: job.target.body });
        await r.arrayBuffer();
        return 1;
      };
    case "deliver":
      return async () => {
        await deliver(job as unknown as Job, {
          attemptId: crypto.randomUUID(),
          attemptNumber: 1,
          signingKeys: key,
          allowPrivateTargets: true,
          abort: new JobAbort(),
        });
        return 1;
      };
    case "callAttempt": {
      const { callAttempt } = await import("../src/worker/attempt-call.ts");
      const { HostLimiter } = await import("../src/worker/host-limiter.ts");
      const { PayloadCache } = await import("../src/worker/payload-cache.ts");
      const { DbClock } = await import("../src/time/db-clock.ts");
      const { Metrics } = await import("../src/obs/metrics.ts");
      const { createLogger } = await import("../src/obs/log.ts");
      const { laneKey } = await import("../src/worker/host-lane.ts");
      const limiter = new HostLimiter<import("../src/worker/in-flight.ts").InFlight>({ floorPerSec: 0.5, maxHeld: 200 });
      const deps = {
        db: undefined as never,
        owner: "bench-worker",
        log: createLogger({ level: "warn" }),
        metrics: new Metrics(),
        limiter,
        payloads: new PayloadCache(undefined as never),
        // No statement: what the batcher's push costs is its own (a promise and an entry).
        completions: { push: () => Promise.resolve(true) } as never,
        keyring: key ? ({ keysFor: () => key } as never) : undefined,
        allowPrivateTargets: true,
        asyncLeaseMs: 60_000,
        clock: new DbClock(),
      };
      const lane = laneKey(url, job.tenant, null);
      const limits = limiter.limitsOf(null);
      return async () => {
        // One call at a time: the job's id is free again in the limiter once its call finished.
        const f = { job: job as unknown as Job, gen: 1, abort: new JobAbort(), leaseAt: performance.now(), phase: "calling" as const };
        limiter.admit(lane, job.id, limits, f, Date.now());
        await callAttempt(deps, f, crypto.randomUUID(), 1, false);
        return 1;
      };
    }
    case "scheduler":
      throw new Error("the scheduler layer is a burst, not one call (schedulerCount)");
    case "claimed rows": {
      const { openPostgres } = await import("../src/store/postgres-driver.ts");
      const db = openPostgres({ url: DB_URL!, maxConnections: 1 });
      // The claim's columns (CLAIMED_COLUMNS and attempt_id) with a one-off job's values.
      const q = `SELECT gen_random_uuid() AS id, 'bench'::text AS tenant, 'running'::text AS status, now() AS due_at, now() AS scheduled_for,
        0 AS priority, 1 AS version, 1 AS calls, 0 AS tries, NULL::text AS idempotency_key, NULL::text AS schedule_id,
        NULL::timestamptz AS nominal_time, jsonb_build_object('url', $1::text, 'method', 'POST', 'headers', '{}'::jsonb, 'body', '{"k":"1"}', 'json', true) AS target,
        3 AS max_attempts, 1000::int8 AS backoff_base_ms, 60000::int8 AS backoff_max_ms, 30000::int8 AS timeout_ms, NULL::timestamptz AS expires_at,
        false AS async, false AS cancel_requested, NULL::timestamptz AS throttle_until, 4294967296::int8 AS epoch, now() AS queued_at,
        1 AS lease_generation, NULL::jsonb AS host_limits, NULL::text AS verify_url, gen_random_uuid() AS lease_key, NULL::text AS checkpoint,
        5 AS slot, false AS catchup, gen_random_uuid() AS attempt_id
        FROM generate_series(1, ${ROWS_A_STATEMENT})`;
      return async () => (await db.query(q, [url])).length;
    }
  }
}
