/**
 * Would another table layout make a delivery cheaper for the database? The two row versions
 * a delivered job writes (the claim, the completion) are new versions of the whole jobs row
 * with an entry in every index it matches: `status` is in most indexes' predicates, so no
 * update of it is HOT. This bench runs the same claim-and-complete loop, written by hand
 * (the scheduler's statements reduced to what the row versions cost: the lock, the claim,
 * the attempt row, the completion), on one connection, over these layouts of a migrated
 * database:
 *
 *   today      the scheduler's schema as its migrations leave it
 *   hot        no jobs index names `status` (all dropped); due jobs in a narrow due_queue
 *              table (claimed by DELETE … RETURNING) and leased ones in in_flight, so the
 *              jobs row's two updates are HOT
 *   tenant-index  today with jobs_tenant_id (tenant, id) back, as before migration 028: the one
 *              index every version of every job entered (a tenant's listing now walks job_tenants)
 *   path-only  today with only the delivery path's jobs indexes (primary key, the claim's,
 *              in-flight, finished)
 *   at-end     today, but the open attempt lives in the jobs row (its id and start, written
 *              by the claim's version anyway) and its attempts row is inserted once, by the
 *              completion, instead of inserted by the claim and updated by the completion
 *   no-attempt today without any attempts row: the floor of keeping the last attempt in the
 *              jobs row
 *   occurrences  today, but every job is a schedule's occurrence (a 9:00 herd of schedules,
 *              overlap=skip, one occurrence each): its schedule id, nominal time and key enter
 *              their indexes in each version
 *   occurrences-queue  the same under overlap=queue: the completion locks the schedules first
 *              and each finish runs the release of a held occurrence (the trigger of 002;
 *              before 029, every occurrence paid for both)
 *
 * Experiments only: "hot" drops indexes the scheduler's other queries need. Per job: the
 * backend's CPU for the claim and for the completion (/proc/PID/stat: the server must run on
 * this machine, as `npm run bench:layout` starts it), deliveries a second of the loop, the
 * share of HOT updates of jobs and the WAL written.
 *
 *   npm run bench:layout -- [--jobs 40000] [--rounds 2] [--layouts today,hot,tenant-index,path-only,at-end,no-attempt,occurrences,occurrences-queue]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { createDatabase, dropDatabase, testDatabaseUrl } from "../test/helpers/db.ts";
import { wholeFlagsOrExit } from "./lib/args.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, range, table } from "./lib/stats.ts";

const USAGE =
  "usage: bun bench/layout-cost.ts [--jobs N] [--rounds N] [--layouts today,hot,tenant-index,path-only,at-end,no-attempt,occurrences,occurrences-queue]   (npm run bench:layout -- …)";
const { values } = parseArgs({ options: { jobs: { type: "string" }, rounds: { type: "string" }, layouts: { type: "string" }, help: { type: "boolean" } } });
// --help prints the usage; a bad number is one line and the usage (bench/lib/args.ts).
const flag = wholeFlagsOrExit("layout-cost", USAGE, values.help);
const N = flag("jobs", values.jobs, 40_000);
const ROUNDS = flag("rounds", values.rounds, 2);
const CLAIM_BATCH = 200;
const COMPLETE_BATCH = 50;
const LAYOUTS = ["today", "hot", "tenant-index", "path-only", "at-end", "no-attempt", "occurrences", "occurrences-queue"] as const;
type Layout = (typeof LAYOUTS)[number];
const layouts = (values.layouts ?? LAYOUTS.join(",")).split(",").map((l) => l.trim()) as Layout[];
for (const l of layouts)
  if (!LAYOUTS.includes(l)) {
    console.error(`layout-cost: --layouts takes ${LAYOUTS.join(", ")} (comma-separated), not ${JSON.stringify(l)}\n${USAGE}`);
    process.exit(2);
  }
const say = (s: string) => process.stderr.write(`${s}\n`);

/** Busy CPU of one process, µs (10 ms ticks). */
function cpuUs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

const PATH_INDEXES = ["jobs_pkey", "jobs_scheduled_tenant_class_id", "jobs_in_flight", "jobs_finished"];

async function shape(sql: postgres.Sql, layout: Layout): Promise<void> {
  if (layout === "tenant-index") await sql`CREATE INDEX jobs_tenant_id ON jobs (tenant, id)`;
  if (layout === "path-only")
    for (const r of await sql`SELECT indexname FROM pg_indexes WHERE tablename = 'jobs' AND indexname <> ALL(${PATH_INDEXES})`)
      await sql.unsafe(`DROP INDEX ${r.indexname}`);
  if (layout === "at-end" || layout === "no-attempt") await sql`ALTER TABLE jobs ADD COLUMN attempt_id uuid, ADD COLUMN attempt_started_at timestamptz`;
  if (layout === "hot") {
    for (const r of await sql`SELECT indexname FROM pg_indexes WHERE tablename = 'jobs' AND indexdef ILIKE '%status%'`)
      await sql.unsafe(`DROP INDEX ${r.indexname}`);
    await sql`CREATE TABLE due_queue (id uuid PRIMARY KEY, tenant text NOT NULL, cls int NOT NULL, due_at timestamptz NOT NULL)`;
    await sql`CREATE INDEX due_queue_order ON due_queue (tenant, cls, due_at, id)`;
    await sql`CREATE TABLE in_flight (id uuid PRIMARY KEY, lease_until timestamptz NOT NULL)`;
  }
}

// The claim: lock the oldest due jobs, a new version of each (status, lease, calls), the attempt row.
const CLAIM_SET = `status = 'running', lease_owner = 'w', lease_generation = j.lease_generation + 1,
  lease_until = now() + interval '30 s', queued_at = now(), updated_at = now(), calls = j.calls + 1`;
const CLAIM_END = `RETURNING j.id, j.tenant, j.status, j.due_at, j.target, j.calls, j.lease_generation, j.epoch),
  ins AS (INSERT INTO attempts (id, job_id, number, lease_generation, epoch, worker, started_at)
    SELECT gen_random_uuid(), c.id, c.calls, c.lease_generation, c.epoch, 'w', now() FROM c)
  SELECT * FROM c`;
// The open attempt in the jobs row: its id and start go into the claim's version.
const CLAIM_IN_ROW = `WITH due AS (SELECT id FROM jobs WHERE status = 'scheduled' AND tenant = 'default' AND sign(priority) = 0 AND due_at <= now()
    ORDER BY due_at LIMIT ${CLAIM_BATCH} FOR UPDATE SKIP LOCKED)
  UPDATE jobs j SET ${CLAIM_SET}, attempt_id = gen_random_uuid(), attempt_started_at = now() FROM due WHERE j.id = due.id
  RETURNING j.id, j.tenant, j.status, j.due_at, j.target, j.calls, j.lease_generation, j.epoch, j.attempt_id`;
const CLAIM: Record<"today" | "hot", string> = {
  today: `WITH due AS (SELECT id FROM jobs WHERE status = 'scheduled' AND tenant = 'default' AND sign(priority) = 0 AND due_at <= now()
      ORDER BY due_at LIMIT ${CLAIM_BATCH} FOR UPDATE SKIP LOCKED),
    c AS (UPDATE jobs j SET ${CLAIM_SET} FROM due WHERE j.id = due.id ${CLAIM_END}`,
  hot: `WITH q AS (DELETE FROM due_queue WHERE id IN (SELECT id FROM due_queue WHERE tenant = 'default' AND cls = 0 AND due_at <= now()
      ORDER BY due_at LIMIT ${CLAIM_BATCH} FOR UPDATE SKIP LOCKED) RETURNING id),
    c AS (UPDATE jobs j SET ${CLAIM_SET} FROM q WHERE j.id = q.id ${CLAIM_END.replace("SELECT * FROM c", "")}
    , f AS (INSERT INTO in_flight SELECT id, now() + interval '30 s' FROM c)
  SELECT * FROM c`,
};
// The completion of at-end / no-attempt: the job's version, and (at-end) the attempt's only row.
const completeInRow = (insert: boolean) => `WITH r AS (SELECT * FROM json_to_recordset($1::text::json) AS r(job_id uuid, gen int)),
  j AS (UPDATE jobs j SET status = 'succeeded', lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now(), tries = j.tries + 1
    FROM r WHERE j.id = r.job_id AND j.status || '' = 'running' AND j.lease_generation = r.gen
    RETURNING j.id, j.attempt_id, j.calls, j.lease_generation, j.epoch, j.attempt_started_at)
  ${
    insert
      ? `, a AS (INSERT INTO attempts (id, job_id, number, lease_generation, epoch, worker, started_at, finished_at, outcome, http_status)
    SELECT j.attempt_id, j.id, j.calls, j.lease_generation, j.epoch, 'w', j.attempt_started_at, now(), 'success', 200 FROM j)`
      : ""
  }
  SELECT count(*)::int AS n FROM j`;
// The completion: a new version of each job (succeeded, lease cleared), its attempt closed.
// overlap=queue's occurrences lock their schedules first, in key order, as CompleteAttempts does (029).
const complete = (hot: boolean, occurrences = false) => `WITH r AS (SELECT * FROM json_to_recordset($1::text::json) AS r(job_id uuid, gen int)),
  ${
    occurrences
      ? `locked AS (SELECT s.tenant, s.id FROM schedules s WHERE (s.tenant, s.id) IN (
      SELECT o.tenant, o.schedule_id FROM jobs o WHERE o.id = ANY(ARRAY(SELECT job_id FROM r)) AND o.schedule_id IS NOT NULL)
    ORDER BY s.tenant, s.id FOR NO KEY UPDATE),`
      : ""
  }
  j AS (UPDATE jobs j SET status = 'succeeded', lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now(), tries = j.tries + 1
    FROM r WHERE j.id = r.job_id AND j.status || '' = 'running' AND j.lease_generation = r.gen
    ${occurrences ? "AND (SELECT count(*) FROM locked) >= 0" : ""} RETURNING j.id)
  ${hot ? ", f AS (DELETE FROM in_flight WHERE id IN (SELECT id FROM j))" : ""}
  , a AS (UPDATE attempts a SET finished_at = now(), outcome = 'success', http_status = 200 WHERE a.job_id IN (SELECT id FROM j) AND a.outcome IS NULL)
  SELECT count(*)::int AS n FROM j`;

interface Result {
  layout: Layout;
  perSec: number;
  claimUs: number;
  completeUs: number;
  hotShare: number;
  walBytes: number;
}

async function round(layout: Layout): Promise<Result> {
  const url = await createDatabase({ migrated: true });
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    await shape(sql, layout);
    // Jobs like bench:peers': one tenant, a small JSON target.
    const target = JSON.stringify({
      url: "http://127.0.0.1:9/hook",
      method: "POST",
      headers: {},
      body: JSON.stringify({ k: "x".repeat(60), n: 1 }),
      json: true,
    });
    if (layout === "occurrences" || layout === "occurrences-queue") {
      // A 9:00 herd of schedules: one occurrence each, as the generator writes them (schedule,
      // nominal instant, the occurrence's idempotency key), each schedule's row beside it.
      await sql.unsafe(
        `INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, catchup_window_ms, overlap)
         SELECT 'default', 's' || g, '0 9 * * 1-5', 'America/New_York', $1::jsonb, 3, 1000, 60000, 30000, 'fire_once', 0, $2
         FROM generate_series(1, ${N}) g`,
        [target, layout === "occurrences" ? "skip" : "queue"],
      );
      // overlap=queue's occurrences run the release of a held one when they finish (029).
      for (let i = 0; i < N; i += 5000)
        await sql.unsafe(
          `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, priority, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms,
                             schedule_id, nominal_time, idempotency_key, releases_held)
           SELECT gen_random_uuid(), 'default', 'scheduled', now() - interval '1 s', now(), 0, $1::jsonb, 3, 1000, 60000, 30000,
                  's' || g, date_trunc('minute', now()), 's' || g || '@' || to_char(date_trunc('minute', now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                  ${layout === "occurrences-queue"}
           FROM generate_series(${i + 1}, ${Math.min(i + 5000, N)}) g`,
          [target],
        );
    } else
      for (let i = 0; i < N; i += 5000)
        await sql.unsafe(
          `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, priority, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
         SELECT gen_random_uuid(), 'default', 'scheduled', now() - interval '1 s', now(), 0, $1::jsonb, 3, 1000, 60000, 30000
         FROM generate_series(1, ${Math.min(5000, N - i)})`,
          [target],
        );
    if (layout === "hot") await sql`INSERT INTO due_queue SELECT id, tenant, sign(priority), due_at FROM jobs`;
    await sql`VACUUM ANALYZE`;
    await sql`CHECKPOINT`;
    const [w0] = await sql<{ b: string }[]>`SELECT wal_bytes::text AS b FROM pg_stat_wal`;
    const [u0] = await sql<
      { upd: string; hot: string }[]
    >`SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE relname = 'jobs'`;
    const inRow = layout === "at-end" || layout === "no-attempt";
    if (layout === "at-end") await sql`ALTER TABLE attempts SET (fillfactor = 100)`;
    const claimSql = layout === "hot" ? CLAIM.hot : inRow ? CLAIM_IN_ROW : CLAIM.today;
    const completeSql = inRow ? completeInRow(layout === "at-end") : complete(layout === "hot", layout === "occurrences-queue");
    let claimUs = 0;
    let completeUs = 0;
    let delivered = 0;
    const t0 = performance.now();
    for (;;) {
      let c0 = cpuUs(pid);
      const rows = await sql.unsafe<{ id: string; lease_generation: number }[]>(claimSql);
      claimUs += cpuUs(pid) - c0;
      if (rows.length === 0) break;
      for (let i = 0; i < rows.length; i += COMPLETE_BATCH) {
        const batch = rows.slice(i, i + COMPLETE_BATCH).map((r) => ({ job_id: r.id, gen: r.lease_generation }));
        c0 = cpuUs(pid);
        const [{ n }] = await sql.unsafe<{ n: number }[]>(completeSql, [JSON.stringify(batch)]);
        completeUs += cpuUs(pid) - c0;
        if (n !== batch.length) throw new Error(`layout-cost: a completion wrote ${n} of ${batch.length}`);
        delivered += batch.length;
      }
    }
    const secs = (performance.now() - t0) / 1000;
    if (delivered !== N) throw new Error(`layout-cost: ${delivered} of ${N} delivered`);
    // The table counters reach the view when the backend reports them: read them from another session after a pause.
    await sql`SELECT pg_stat_force_next_flush()`.catch(() => undefined);
    await Bun.sleep(600);
    const other = postgres(url, { max: 1, onnotice: () => {} });
    const [u1] = await other<
      { upd: string; hot: string }[]
    >`SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE relname = 'jobs'`;
    const [w1] = await other<{ b: string }[]>`SELECT wal_bytes::text AS b FROM pg_stat_wal`;
    await other.end();
    const upd = Number(u1.upd) - Number(u0.upd);
    return {
      layout,
      perSec: delivered / secs,
      claimUs: claimUs / delivered,
      completeUs: completeUs / delivered,
      hotShare: upd > 0 ? (Number(u1.hot) - Number(u0.hot)) / upd : Number.NaN,
      walBytes: (Number(w1.b) - Number(w0.b)) / delivered,
    };
  } finally {
    await sql.end();
    await dropDatabase(url).catch(() => {});
  }
}

const results: Result[] = [];
for (let r = 1; r <= ROUNDS; r++)
  for (const layout of layouts) {
    say(`layout-cost: round ${r} of ${ROUNDS}, ${layout} (${N} jobs)…`);
    results.push(await round(layout));
  }

const admin = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
const server = await describeServer((s) => admin.unsafe(s) as never);
await admin.end();
process.stdout.write(
  `\nlayout cost: ${N} jobs due per round, ${ROUNDS} rounds alternated, one connection, claims of ${CLAIM_BATCH}, completions of ${COMPLETE_BATCH}, no calls\n\n`,
);
process.stdout.write(
  table(
    ["layout", "deliveries/s", "claim µs/job", "complete µs/job", "both µs/job", "jobs updates HOT", "WAL bytes/job"],
    layouts.map((l) => {
      const rs = results.filter((r) => r.layout === l);
      return [
        l,
        range(
          rs.map((r) => r.perSec),
          0,
        ),
        range(rs.map((r) => r.claimUs)),
        range(rs.map((r) => r.completeUs)),
        range(rs.map((r) => r.claimUs + r.completeUs)),
        range(
          rs.map((r) => r.hotShare * 100),
          0,
        ).concat(" %"),
        range(
          rs.map((r) => r.walBytes),
          0,
        ),
      ];
    }),
  ),
);
process.stdout.write(
  "\nµs/job: user + system time of the connection's backend (/proc/PID/stat, 10 ms ticks) / jobs, commits included. HOT: heap-only updates of jobs / all its updates (pg_stat_user_tables).\n\n",
);
process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
