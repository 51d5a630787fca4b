/**
 * What the delivery path's two per-job statements cost the database, alone: the claim that
 * starts its jobs (ClaimDueIds, for a worker in the dispatcher's process) and the completion
 * (CompleteAttempts), run through the scheduler's own query functions on one connection, no
 * call made, nothing else running. Figures per job: the backend's CPU (/proc/PID/stat, so
 * the server must run on this machine, as `npm run bench:statements` starts it) and the
 * wall time of the loop. In `bench:peers` the backends spend about twice this per job (the
 * cores are shared with the processes calling): this is the floor a change to the SQL or
 * the schema moves.
 *
 *   npm run bench:statements -- [--jobs 20000] [--rounds 3] [--claim-batch 250] [--complete-batch 100] [--claims ids,sampled,run] [--schema-change "SQL"]
 */
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../test/helpers/db.ts";
import { seedAuthority } from "../src/store/authority.ts";
import { claimDueIds, claimDueRun, sampleDue } from "../src/store/dispatch-queries.ts";
import { migrate } from "../src/store/migrate.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { acquireShards } from "../src/store/shards.ts";
import { completeAttempts, type Completion } from "../src/store/worker-queries.ts";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { insertBurst } from "./lib/burst-jobs.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { procCpuSeconds } from "./lib/scheduler-process.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, table } from "./lib/stats.ts";
import { successOf } from "../test/helpers/completion.ts";

const USAGE =
  "usage: bun bench/statement-cost.ts [--jobs N] [--rounds N] [--claim-batch N] [--complete-batch N] [--claims ids,sampled,run] [--schema-change SQL]   (npm run bench:statements -- …)";
const { values } = parseArgs({
  options: {
    jobs: { type: "string" },
    rounds: { type: "string" },
    "claim-batch": { type: "string" },
    "complete-batch": { type: "string" },
    "schema-change": { type: "string" },
    claims: { type: "string" },
    help: { type: "boolean" },
  },
});
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("statement-cost", USAGE, values.help);
const N = flag("jobs", values.jobs, 20_000);
const ROUNDS = flag("rounds", values.rounds, 3);
const CLAIM_BATCH = flag("claim-batch", values["claim-batch"], 250);
const COMPLETE_BATCH = flag("complete-batch", values["complete-batch"], 100);
/**
 * How the claims find their jobs, each measured in every round (alternated):
 * - ids: handed the ids (one SELECT before the loop): the claim alone;
 * - sampled: a discovery (SampleDue) before each claim of its candidates, as a pass without
 *   a run does;
 * - run: ClaimDueRun, the oldest due jobs of the one tenant and class, no discovery.
 */
const CLAIM_WAYS = ["ids", "sampled", "run"] as const;
type ClaimWay = (typeof CLAIM_WAYS)[number];
const ways = (values.claims ?? "ids,sampled,run").split(",").map((w) => w.trim()) as ClaimWay[];
for (const w of ways)
  if (!CLAIM_WAYS.includes(w)) {
    console.error(`statement-cost: --claims takes ${CLAIM_WAYS.join(", ")} (comma-separated), not ${JSON.stringify(w)}\n${USAGE}`);
    process.exit(2);
  }

const url = await createDatabase();
const db = openPostgres({ url, maxConnections: 1 });
const admin = postgres(url, { max: 1, onnotice: () => {} });
const say = (s: string) => process.stderr.write(`${s}\n`);

const CLAIM_LABEL: Record<ClaimWay, string> = {
  ids: "ClaimDueIds, ids given",
  sampled: "SampleDue + ClaimDueIds",
  run: "ClaimDueRun",
};
interface Figures {
  cpuUs: number;
  wallUs: number;
  walBytes: number;
}
const results: { way: ClaimWay; claim: Figures; complete: Figures }[] = [];
try {
  await migrate(db);
  await seedAuthority(db, "local");
  // An experiment on the schema (an index dropped, a trigger off, a fillfactor), applied after the migrations.
  if (values["schema-change"]) await db.exec(values["schema-change"]);
  const backend = Number((await db.query<{ pid: number }>("SELECT pg_backend_pid() AS pid"))[0]!.pid);
  /** The backend's CPU, the wall time and the WAL written of fn, per job. */
  const measure = async (fn: () => Promise<void>): Promise<Figures> => {
    const lsn0 = (await db.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn"))[0]!.lsn;
    const cpu0 = procCpuSeconds(backend);
    if (cpu0 === undefined)
      throw new Error("statement-cost: cannot read the backend's /proc entry: the server must run on this machine (npm run bench:statements starts one)");
    const t0 = performance.now();
    await fn();
    const wall = performance.now() - t0;
    const cpuUs = ((procCpuSeconds(backend)! - cpu0) / N) * 1e6;
    // The server runs nothing else: every byte of WAL in the span is this loop's (commits included).
    const wal = await db.query<{ bytes: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::text AS bytes", [lsn0]);
    return { cpuUs, wallUs: (wall / N) * 1000, walBytes: Number(wal[0]!.bytes) / N };
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (const way of r % 2 === 0 ? ways : [...ways].reverse()) {
      say(`statement-cost: round ${r + 1} of ${ROUNDS}, claims by ${way}: ${N} jobs`);
      results.push({ way, ...(await oneRound(way)) });
    }
  }

  async function oneRound(way: ClaimWay): Promise<{ claim: Figures; complete: Figures }> {
    await db.exec("TRUNCATE jobs, attempts CASCADE");
    // Jobs as the peers bench makes them, all due (no call is made here).
    await insertBurst(db, N, "http://127.0.0.1:9/hook", -1000);
    await db.exec("VACUUM ANALYZE jobs");
    await db.exec("VACUUM ANALYZE attempts");
    await db.exec("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name LIKE 'dispatch:%'");
    const shards = await acquireShards(db, { owner: "bench-dispatcher", shards: [0], ttlMs: 3_600_000, skewMs: 0, region: "local" });
    const fence = { owner: "bench-dispatcher", shards, count: 1, region: "local", generation: 0 };
    const ids = way === "ids" ? (await db.query<{ id: string }>("SELECT id FROM jobs ORDER BY due_at, id")).map((x) => x.id) : [];
    const started: { job_id: string; gen: number; attempt_id: string }[] = [];
    const base = { fence, token: shards[0]!.epoch, ttlMs: 3_600_000, worker: "bench-worker" };
    const claimSome = async (i: number): Promise<number> => {
      const limit = Math.min(CLAIM_BATCH, N - i);
      const attemptIds = Array.from({ length: limit }, () => Bun.randomUUIDv7());
      if (way === "run") return push(await claimDueRun(db, { ...base, limit, startLimit: limit, tenant: "bench", cls: 0, attemptIds }));
      let batch = ids.slice(i, i + limit);
      if (way === "sampled") {
        // As a pass does: SampleDue's arguments as DueClaimer.sample gives them.
        const s = await sampleDue(db, { cursor: "", tenants: 64, budget: 4 * limit, limit, horizonMs: 0, shards: { list: [0], count: 1 } });
        batch = s.candidates.map((c) => c.id).slice(0, limit);
      }
      return push(await claimDueIds(db, { ...base, limit, startLimit: limit, ids: batch, attemptIds }));
    };
    const push = (got: { id: string; lease_generation: number; attempt_id: string | null }[]): number => {
      for (const j of got) started.push({ job_id: j.id, gen: j.lease_generation, attempt_id: j.attempt_id! });
      return got.length;
    };
    const claim = await measure(async () => {
      for (let i = 0; i < N; ) {
        const got = await claimSome(i);
        if (got !== Math.min(CLAIM_BATCH, N - i)) throw new Error(`statement-cost: a claim by ${way} took ${got} of ${Math.min(CLAIM_BATCH, N - i)}`);
        i += got;
      }
    });
    const now = new Date();
    const complete = await measure(async () => {
      for (let i = 0; i < started.length; i += COMPLETE_BATCH) {
        const items: Completion[] = started.slice(i, i + COMPLETE_BATCH).map((s) => successOf({ ...s, started_at: now, finished_at: now }));
        const rows = await completeAttempts(db, "bench-worker", items);
        if (rows.length !== items.length) throw new Error(`statement-cost: a completion wrote ${rows.length} of ${items.length}`);
      }
    });
    return { claim, complete };
  }
  const server = await describeServer((s) => admin.unsafe(s) as never);
  const range = (xs: number[]) => {
    const lo = Math.min(...xs),
      hi = Math.max(...xs);
    return Math.abs(hi - lo) < 0.05 ? lo.toFixed(1) : `${lo.toFixed(1)}–${hi.toFixed(1)}`;
  };
  process.stdout.write(`\nstatement cost: ${N} jobs a round, ${ROUNDS} rounds, one connection, nothing else running\n\n`);
  process.stdout.write(
    table(
      ["statement", "batch", "backend CPU µs/job", "wall µs/job", "WAL bytes/job"],
      ways.flatMap((way) => {
        const rs = results.filter((r) => r.way === way);
        const row = (label: string, batch: string, f: (r: (typeof rs)[number]) => Figures) => [
          label,
          batch,
          range(rs.map((r) => f(r).cpuUs)),
          range(rs.map((r) => f(r).wallUs)),
          range(rs.map((r) => f(r).walBytes)),
        ];
        return [
          row(`claim: ${CLAIM_LABEL[way]}`, String(CLAIM_BATCH), (r) => r.claim),
          row("CompleteAttempts (success)", String(COMPLETE_BATCH), (r) => r.complete),
          row("both", "", (r) => ({
            cpuUs: r.claim.cpuUs + r.complete.cpuUs,
            wallUs: r.claim.wallUs + r.complete.wallUs,
            walBytes: r.claim.walBytes + r.complete.walBytes,
          })),
        ];
      }),
    ),
  );
  process.stdout.write(
    "\nbackend CPU: user + system time of the connection's backend (/proc/PID/stat, 10 ms ticks) / jobs; wall: the loop's time / jobs, commits included;\nWAL bytes: pg_current_wal_insert_lsn() before and after the loop / jobs (the server runs nothing else).\n\n",
  );
  process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
} finally {
  await db.close();
  await admin.end();
  await dropDatabase(url).catch(() => {});
}
