#!/usr/bin/env bun
/**
 * Where a delivery's cost comes from, one step at a time: the design's minimal loop (one claim
 * per 500 jobs, the POST, one completion per 200), then that loop plus each thing the
 * scheduler does on top of it (a check statement, attempt rows), the scheduler's own tables
 * (all their indexes and triggers) under the same three statements, and last the two `fused`
 * steps: two statements, the claim being the check and opening the attempts as the
 * scheduler's claims do (no fence, unlike the scheduler's), on plain tables and on the
 * scheduler's. Each step is a separate table or database on the same durable server, the same
 * loopback target (its own process), 32 calls in flight. The scheduler itself is bench:peers'
 * figure; the gap between the `fused, sched. tables` step and it is the scheduler's fence,
 * statements and process, the gaps between steps are what each piece costs.
 *
 *   npm run bench:ladder                  # 20,000 jobs per step
 *   npm run bench:ladder -- --jobs 50000
 *
 * See bench/README.md "cost ladder".
 */
import { parseArgs } from "node:util";
import postgres from "postgres";
import { migrate } from "../src/store/migrate.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { describeMachine, packageVersion } from "./lib/machine.ts";
import { describeServer, environmentRows } from "./lib/server.ts";
import { keyValues, table } from "./lib/stats.ts";
import { startTargetProcess } from "./lib/target-process.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);
const { values } = parseArgs({ args: Bun.argv.slice(2), options: { jobs: { type: "string" }, concurrency: { type: "string" } } });
const N = Number(values.jobs ?? 20000);
const CONC = Number(values.concurrency ?? 32);
const base = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
if (!base) throw new Error("needs TEST_DATABASE_URL or DATABASE_URL (npm run bench:ladder starts a throwaway server)");

// The target in its own process, so that this process's CPU is the loop's alone.
const target = await startTargetProcess("ladder");
const url = target.url;

interface Step {
  name: string;
  /** What this step adds to the one before. */
  adds: string;
  schema: "plain" | "scheduler";
  check: boolean;
  attempts: boolean;
  /** The claim is the check and opens the attempts, in one statement (as the scheduler's claim does). */
  fused?: boolean;
}
const STEPS: Step[] = [
  { name: "minimal", adds: "claim 500 → POST → complete 200 (the design's loop)", schema: "plain", check: false, attempts: false },
  { name: "+check", adds: "a pre-call check by primary key per launch batch", schema: "plain", check: true, attempts: false },
  { name: "+attempts", adds: "an attempt row opened by the check, closed by the completion", schema: "plain", check: true, attempts: true },
  { name: "scheduler tables", adds: "the same statements on the scheduler's jobs and attempts tables", schema: "scheduler", check: true, attempts: true },
  {
    name: "fused",
    adds: "+attempts with no check statement: the claim checks and opens the attempts",
    schema: "plain",
    check: true,
    attempts: true,
    fused: true,
  },
  {
    name: "fused, sched. tables",
    adds: "the fused claim on the scheduler's jobs and attempts tables",
    schema: "scheduler",
    check: true,
    attempts: true,
    fused: true,
  },
];

async function freshDatabase(): Promise<string> {
  const admin = postgres(base!, { max: 1, onnotice: () => {} });
  const name = `ladder_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(base!);
  u.pathname = `/${name}`;
  return u.toString();
}

async function dropDatabase(dbUrl: string): Promise<void> {
  const admin = postgres(base!, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(dbUrl).pathname.slice(1)} WITH (FORCE)`);
  await admin.end();
}

/** The three tables' names and the statements of a step, as plain SQL. */
function statements(step: Step) {
  const jobs = step.schema === "scheduler" ? "jobs" : "pj";
  const attempts = step.schema === "scheduler" ? "attempts" : "pa";
  // The seeds' minimum in one statement: the claim's own conditions are the pre-call check,
  // and the attempts it opens are durable with it (the scheduler's ClaimDueRun does so).
  const fusedClaim = `WITH c AS (SELECT id FROM ${jobs} WHERE status = 'scheduled' AND due_at <= now() ORDER BY due_at, id LIMIT $1 FOR UPDATE SKIP LOCKED),
      u AS (UPDATE ${jobs} j SET status = 'running', lease_owner = 'w1', lease_generation = j.lease_generation + 1, lease_until = now() + interval '30 s',
          calls = j.calls + 1, updated_at = now()
        FROM c WHERE j.id = c.id RETURNING j.id, j.lease_generation, j.version, j.target, j.calls, gen_random_uuid() AS attempt_id),
      ins AS (INSERT INTO ${attempts} (id, job_id, number, lease_generation, worker, started_at)
        SELECT u.attempt_id, u.id, u.calls, u.lease_generation, 'w1', now() FROM u)
      SELECT id, lease_generation, version, target, attempt_id FROM u`;
  return {
    jobs,
    claim: step.fused
      ? fusedClaim
      : `WITH c AS (SELECT id FROM ${jobs} WHERE status = 'scheduled' AND due_at <= now() ORDER BY due_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
      UPDATE ${jobs} j SET status = 'running', lease_owner = 'w1', lease_generation = j.lease_generation + 1, lease_until = now() + interval '30 s'
      FROM c WHERE j.id = c.id RETURNING j.id, j.lease_generation, j.version, j.target`,
    check: step.attempts
      ? `WITH ok AS (UPDATE ${jobs} j SET calls = j.calls + 1, lease_until = now() + interval '30 s', updated_at = now()
          WHERE j.id = ANY($1::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = 'w1'
            AND j.lease_generation = ($2::int[])[array_position($1::uuid[], j.id)] AND j.version = ($3::int[])[array_position($1::uuid[], j.id)]
          RETURNING j.id, j.calls, j.lease_generation)
        INSERT INTO ${attempts} (id, job_id, number, lease_generation, worker, started_at)
        SELECT gen_random_uuid(), ok.id, ok.calls, ok.lease_generation, 'w1', now() FROM ok RETURNING id, job_id`
      : `UPDATE ${jobs} j SET calls = j.calls + 1, lease_until = now() + interval '30 s', updated_at = now()
          WHERE j.id = ANY($1::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = 'w1'
            AND j.lease_generation = ($2::int[])[array_position($1::uuid[], j.id)] AND j.version = ($3::int[])[array_position($1::uuid[], j.id)]
          RETURNING j.id, NULL::uuid AS attempt_id`,
    complete: step.attempts
      ? `WITH j AS (UPDATE ${jobs} j SET status = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL, tries = j.tries + 1, updated_at = now()
          WHERE j.id = ANY($1::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = 'w1' RETURNING j.id)
        UPDATE ${attempts} a SET outcome = 'success', http_status = 200, finished_at = now() WHERE a.id = ANY($2::uuid[]) AND a.outcome IS NULL`
      : `UPDATE ${jobs} j SET status = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL, tries = j.tries + 1, updated_at = now()
          WHERE j.id = ANY($1::uuid[]) AND j.status || '' = 'running' AND j.lease_owner = 'w1'`,
  };
}

async function setUp(step: Step, dbUrl: string): Promise<void> {
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
  const targetJson = `jsonb_build_object('url', '${url}', 'method', 'POST', 'headers', '{}'::jsonb, 'body', '{"k":"' || g || '"}', 'json', true)`;
  if (step.schema === "scheduler") {
    const db = openPostgres({ url: dbUrl, maxConnections: 1 });
    await migrate(db);
    await db.close();
    await sql.unsafe(`INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, epoch)
      SELECT gen_random_uuid(), 'default', 'scheduled', now(), now(), ${targetJson}, 5, 1000, 60000, 30000, 4294967297 FROM generate_series(1, ${N}) g`);
  } else {
    await sql.unsafe(`CREATE TABLE pj (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status text NOT NULL, due_at timestamptz NOT NULL,
      lease_owner text, lease_generation int NOT NULL DEFAULT 0, lease_until timestamptz, version int NOT NULL DEFAULT 1,
      calls int NOT NULL DEFAULT 0, tries int NOT NULL DEFAULT 0, target jsonb NOT NULL, finished_at timestamptz, updated_at timestamptz)`);
    await sql.unsafe(`CREATE INDEX pj_due ON pj (due_at, id) WHERE status = 'scheduled'`);
    await sql.unsafe(`CREATE TABLE pa (id uuid PRIMARY KEY, job_id uuid NOT NULL REFERENCES pj ON DELETE CASCADE, number int NOT NULL,
      lease_generation int NOT NULL, worker text, started_at timestamptz, finished_at timestamptz, outcome text, http_status int, UNIQUE (job_id, number))`);
    await sql.unsafe(`INSERT INTO pj (status, due_at, target) SELECT 'scheduled', now(), ${targetJson} FROM generate_series(1, ${N}) g`);
  }
  await sql.unsafe("VACUUM ANALYZE");
  await sql.end();
}

interface Figures {
  perSecond: number;
  commitsPerJob: number;
  serverUsPerJob?: number;
  clientUsPerJob: number;
}

async function serverCounters(admin: postgres.Sql, db: string): Promise<{ commits: number; execMs?: number }> {
  const [d] = await admin.unsafe(`SELECT xact_commit::float8 AS c FROM pg_stat_database WHERE datname = $1`, [db]);
  let execMs: number | undefined;
  try {
    const [s] = await admin.unsafe(
      `SELECT coalesce(sum(total_exec_time), 0)::float8 AS ms FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`,
      [db],
    );
    execMs = Number(s!.ms);
  } catch {
    // pg_stat_statements not loaded: the server column stays empty
  }
  return { commits: Number(d!.c), execMs };
}

async function run(step: Step): Promise<Figures> {
  const dbUrl = await freshDatabase();
  try {
    await setUp(step, dbUrl);
    const q = statements(step);
    const sql = postgres(dbUrl, { max: 4, onnotice: () => {} });
    const admin = postgres(base!, { max: 1, onnotice: () => {} });
    const dbName = new URL(dbUrl).pathname.slice(1);
    const before = await serverCounters(admin, dbName);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let delivered = 0;
    let inFlight = 0;
    type Job = { id: string; lease_generation: number; version: number; target: { url: string; body: string }; attempt_id?: string };
    const ready: Job[] = [];
    const done: Job[] = [];
    let flushing = Promise.resolve();
    let claiming: Promise<void> | undefined;
    const flush = async () => {
      const batch = done.splice(0);
      if (batch.length === 0) return;
      await sql.unsafe(q.complete, step.attempts ? [batch.map((j) => j.id), batch.map((j) => j.attempt_id!)] : [batch.map((j) => j.id)], { prepare: true });
    };
    const call = async (j: Job) => {
      const r = await fetch(j.target.url, {
        method: "POST",
        headers: { "content-type": "application/json", "webhook-id": j.id },
        body: j.target.body,
        redirect: "manual",
      });
      await r.arrayBuffer();
      delivered++;
      done.push(j);
      if (done.length >= 200) flushing = flushing.then(flush);
    };
    // Checked jobs wait here for a call slot: checks run ahead of the calls (as the worker's
    // armed attempts do), so a check's commit is not on every call's path. At most one check
    // at a time, each for the room up to 2 × CONC checked or in flight.
    const armed: Job[] = [];
    let checking = false;
    const launch = () => {
      while (armed.length > 0 && inFlight < CONC) {
        const j = armed.shift()!;
        inFlight++;
        call(j).finally(() => {
          inFlight--;
          launch();
          void arm();
        });
      }
    };
    const arm = async (): Promise<void> => {
      if (checking) return;
      checking = true;
      try {
        for (;;) {
          const room = 2 * CONC - inFlight - armed.length;
          if (ready.length === 0 || room < Math.min(16, ready.length)) break;
          const batch = ready.splice(0, room);
          if (step.check && !step.fused) {
            const rows = await sql.unsafe(q.check, [batch.map((j) => j.id), batch.map((j) => j.lease_generation), batch.map((j) => j.version)], {
              prepare: true,
            });
            const attempt = new Map(rows.map((r) => [r.job_id ?? r.id, r.attempt_id ?? r.id]));
            for (const j of batch) j.attempt_id = attempt.get(j.id);
          }
          armed.push(...batch);
          launch();
        }
      } finally {
        checking = false;
      }
    };
    const pump = arm;
    while (delivered < N) {
      if (ready.length < 500 && !claiming) {
        claiming = (async () => {
          const rows = await sql.unsafe(q.claim, [500], { prepare: true });
          ready.push(...(rows as unknown as Job[]));
        })().finally(() => (claiming = undefined));
      }
      await pump();
      await Bun.sleep(1);
    }
    await flushing;
    await flush();
    const seconds = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(cpu0);
    await sql.end();
    const after = await serverCounters(admin, dbName);
    await admin.end();
    return {
      perSecond: N / seconds,
      commitsPerJob: (after.commits - before.commits) / N,
      serverUsPerJob: before.execMs !== undefined && after.execMs !== undefined ? ((after.execMs - before.execMs) * 1000) / N : undefined,
      clientUsPerJob: (c.user + c.system) / N,
    };
  } finally {
    await dropDatabase(dbUrl);
  }
}

const results: [Step, Figures][] = [];
for (const step of STEPS) {
  say(`ladder: ${step.name} (${N} jobs)…`);
  results.push([step, await run(step)]);
}
target.stop();

const admin = postgres(base, { max: 1, onnotice: () => {} });
const server = await describeServer((s) => admin.unsafe(s) as never);
await admin.end();
const minimal = results[0]![1].perSecond;
process.stdout.write(`\ncost ladder: ${N} jobs already due per step, ${CONC} calls in flight, one loopback Bun target in its own process\n\n`);
process.stdout.write(
  table(
    ["step", "deliveries/s", "vs minimal", "commits/job", "server µs/job", "loop CPU µs/job", "adds"],
    results.map(([s, f]) => [
      s.name,
      f.perSecond.toFixed(0),
      `${(f.perSecond / minimal).toFixed(2)}×`,
      f.commitsPerJob.toFixed(3),
      f.serverUsPerJob?.toFixed(1) ?? "-",
      f.clientUsPerJob.toFixed(1),
      s.adds,
    ]),
  ),
);
process.stdout.write(
  "\nserver µs/job: pg_stat_statements execution time of the step's database / jobs; loop CPU: this process (claims, checks, completions, calls; not the target).\n\n",
);
process.stdout.write(`${keyValues(environmentRows(describeMachine(server.version, `postgres.js ${packageVersion("postgres")}`), server))}\n`);
