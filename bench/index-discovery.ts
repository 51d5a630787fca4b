#!/usr/bin/env bun
/**
 * Due discovery: what "give me the next <= 500 due jobs by now" costs the dispatcher, with the
 * SQL index (the jobs table on jobs_status_due_at) and the Redis index (Bun's RedisClient,
 * sorted sets sharded by job id), as the number of pending future jobs grows.
 *
 *   bash scripts/with-services.sh node_modules/.bin/bun bench/index-discovery.ts
 *   ... bench/index-discovery.ts --sizes 10000,100000 --reps 500 --json out.json
 *
 * Per size: a fresh migrated database with N future jobs and a fixed few due now (one
 * INSERT ... SELECT generate_series per chunk), VACUUM ANALYZE, the same entries in Redis
 * under a key prefix of this run; then dueList({ dueBy: now, limit }) and an empty discovery
 * (dueBy = now - 1 day) on both, interleaved, after a warm-up. See bench/README.md.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { RedisClient } from "bun";
import { BunRedisDueIndex } from "../src/index/bun-redis-index.ts";
import type { DueEntry, DueIndex } from "../src/index/due-index.ts";
import { SqlDueIndex } from "../src/index/sql-index.ts";
import type { Db } from "../src/store/db.ts";
import { migrate } from "../src/store/migrate.ts";
import { openPostgres } from "../src/store/postgres-driver.ts";
import { createDatabase, dropDatabase } from "../test/helpers/db.ts";
import { describeMachine, packageVersion, type Machine } from "./lib/machine.ts";
import { describeServer, settingsLine } from "./lib/server.ts";
import { keyValues, percentile, table } from "./lib/stats.ts";

const say = (line: string) => process.stderr.write(`${line}\n`);

const USAGE = `usage: bun bench/index-discovery.ts [options]
  (bash scripts/with-services.sh node_modules/.bin/bun bench/index-discovery.ts [options])

  --sizes N,N,...   pending future jobs per run (10000,100000,1000000)
  --due N           jobs due now among them (500)
  --limit N         dueList limit (500)
  --reps N          measured calls per index and kind (200)
  --warmup N        unmeasured calls per index and kind first (20)
  --shards N        Redis sorted sets (8)
  --json FILE       also write the figures as JSON

PostgreSQL: TEST_DATABASE_URL or DATABASE_URL (a server where the bench may create and
drop a database). Redis: TEST_REDIS_URL or REDIS_URL (keys under a prefix of this run are
written and deleted; nothing else is touched).`;

class UsageError extends Error {}

interface Args {
  sizes: number[];
  due: number;
  limit: number;
  reps: number;
  warmup: number;
  shards: number;
  json?: string;
}

function whole(flag: string, raw: string, min: number, max: number): number {
  const n = Number(raw.replace(/_/g, ""));
  if (!/^\d[\d_]*$/.test(raw) || n < min || n > max)
    throw new UsageError(`--${flag} must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})`);
  return n;
}

function parse(argv: string[]): Args | undefined {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        sizes: { type: "string" },
        due: { type: "string" },
        limit: { type: "string" },
        reps: { type: "string" },
        warmup: { type: "string" },
        shards: { type: "string" },
        json: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return undefined;
  }
  const sizes = (values.sizes ?? "10000,100000,1000000").split(",").map((s) => whole("sizes", s.trim(), 0, 20_000_000));
  return {
    sizes,
    due: values.due ? whole("due", values.due, 0, 1_000_000) : 500,
    limit: values.limit ? whole("limit", values.limit, 1, 10_000) : 500,
    reps: values.reps ? whole("reps", values.reps, 1, 1_000_000) : 200,
    warmup: values.warmup ? whole("warmup", values.warmup, 0, 1_000_000) : 20,
    shards: values.shards ? whole("shards", values.shards, 1, 1024) : 8,
    json: values.json,
  };
}

// ---------------------------------------------------------------------------------------------
// Loading

const TARGET = JSON.stringify({ url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: false });
/** Rows per INSERT ... SELECT generate_series statement (only so progress can be printed). */
const INSERT_CHUNK = 250_000;
/** Future jobs are due between now + 10 min and now + 30 days; due jobs in the last hour. */
const FUTURE_FROM_MS = 10 * 60_000;
const FUTURE_SPAN_MS = 30 * 86_400_000;
const DUE_SPAN_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * Inserts n scheduled jobs due at random instants in [from, from + span) (epoch ms, truncated to
 * whole milliseconds so that SQL and Redis hold the same due times).
 */
async function insertJobs(db: Db, n: number, fromMs: number, spanMs: number, label: string): Promise<void> {
  for (let done = 0; done < n; ) {
    const k = Math.min(INSERT_CHUNK, n - done);
    await db.query(
      `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
       SELECT gen_random_uuid(), 'default', 'scheduled', d, d, $4::jsonb, 5, 1000, 60000, 5000
       FROM (SELECT timestamptz 'epoch' + floor($1::bigint + random() * $2::bigint) * interval '1 millisecond' AS d
             FROM generate_series(1, $3::int)) s`,
      [String(fromMs), String(spanMs), k, TARGET],
    );
    done += k;
    if (n > INSERT_CHUNK) say(`  ${label}: ${done}/${n} rows`);
  }
}

/** Reads every scheduled job back (keyset by id) and puts it into the Redis index. */
async function loadRedis(db: Db, index: DueIndex, total: number): Promise<void> {
  const chunk = 20_000;
  let after = "00000000-0000-0000-0000-000000000000";
  let done = 0;
  let lastSay = performance.now();
  for (;;) {
    const rows = await db.query<{ id: string; ms: string }>(
      `SELECT id::text AS id, (extract(epoch FROM due_at) * 1000)::bigint AS ms FROM jobs
       WHERE status = 'scheduled' AND id > $1::uuid ORDER BY id LIMIT $2`,
      [after, chunk],
    );
    if (rows.length === 0) break;
    await index.entriesUpsert({ entries: rows.map((r) => ({ jobId: r.id, dueMs: Number(r.ms) })) });
    after = rows[rows.length - 1].id;
    done += rows.length;
    if (performance.now() - lastSay > 2000 || done === total) {
      say(`  redis: ${done}/${total} entries`);
      lastSay = performance.now();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Redis helpers

async function infoField(client: RedisClient, section: string, field: string): Promise<string | undefined> {
  const text = String(await client.send("INFO", [section]));
  return new RegExp(`^${field}:(.*)$`, "m").exec(text)?.[1]?.trim();
}

async function usedMemory(client: RedisClient): Promise<number> {
  return Number(await infoField(client, "memory", "used_memory"));
}

/** Deletes every key under `${prefix}:` (SCAN + DEL one key at a time; never FLUSHALL). */
async function deleteKeys(client: RedisClient, prefix: string): Promise<number> {
  let cursor = "0";
  let n = 0;
  do {
    const [next, keys] = (await client.send("SCAN", [cursor, "MATCH", `${prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}:*`, "COUNT", "1000"])) as [
      string,
      string[],
    ];
    for (const k of keys) n += Number(await client.send("DEL", [k]));
    cursor = String(next);
  } while (cursor !== "0");
  return n;
}

// ---------------------------------------------------------------------------------------------
// Measuring

interface Latency {
  p50: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
  /** Back-to-back calls per second of one caller: 1000 / mean. */
  callsPerSecond: number;
}

function latency(samples: number[]): Latency {
  const s = [...samples].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { p50: percentile(s, 50), p99: percentile(s, 99), mean, min: s[0], max: s[s.length - 1], callsPerSecond: 1000 / mean };
}

async function timed(fn: () => Promise<DueEntry[]>): Promise<[number, DueEntry[]]> {
  const t0 = performance.now();
  const r = await fn();
  return [performance.now() - t0, r];
}

interface Row {
  size: number;
  due: number;
  index: "sql" | "redis";
  dueList: Latency;
  empty: Latency;
  /** SQL: pg_relation_size('jobs_status_due_at'). Redis: used_memory after load - before. */
  memoryBytes: number;
  memoryWhat: string;
  /** Redis only: sum of MEMORY USAGE over the shard keys. */
  keyBytes?: number;
  loadSeconds: number;
}

interface SizeExtras {
  size: number;
  tableBytes: number;
  /** EXPLAIN ANALYZE of the due query with the values inlined (a custom plan). */
  plan: string;
  /** The same as a prepared statement under plan_cache_mode = force_generic_plan. */
  genericPlan: string;
  preparedPlans?: { generic: number; custom: number };
  redisEncoding?: string;
  insertSeconds: number;
  vacuumSeconds: number;
}

async function runSize(p: {
  size: number;
  args: Args;
  redisUrl: string;
  redisAdmin: RedisClient;
  prefix: string;
  track: { dbUrl?: string; index?: DueIndex };
  problems: string[];
}): Promise<{ rows: Row[]; extras: SizeExtras }> {
  const { size, args } = p;
  const total = size + args.due;
  say(`size ${size}: fresh database, ${size} future jobs + ${args.due} due now`);
  const dbUrl = await createDatabase();
  p.track.dbUrl = dbUrl;
  // One connection, so every call reuses one session and its prepared statements (as a
  // dispatcher's pooled connection would) and pg_prepared_statements can be read afterwards.
  const db = openPostgres({ url: dbUrl, maxConnections: 1, applicationName: "bench-index-discovery" });
  try {
    await migrate(db);
    const now0 = Date.now();
    let t = performance.now();
    await insertJobs(db, size, now0 + FUTURE_FROM_MS, FUTURE_SPAN_MS, "future");
    await insertJobs(db, args.due, now0 - DUE_SPAN_MS, DUE_SPAN_MS, "due");
    const insertSeconds = (performance.now() - t) / 1000;
    say(`  postgres: ${total} rows in ${insertSeconds.toFixed(1)} s; VACUUM ANALYZE`);
    t = performance.now();
    await db.exec("VACUUM ANALYZE jobs");
    const vacuumSeconds = (performance.now() - t) / 1000;
    const [sz] = await db.query<{ idx: string; tbl: string }>("SELECT pg_relation_size('jobs_status_due_at') AS idx, pg_total_relation_size('jobs') AS tbl");
    const pgIndexBytes = Number(sz.idx);

    // Redis: the same entries under a prefix of this run and size.
    const index = new BunRedisDueIndex({ url: p.redisUrl, prefix: `${p.prefix}:${size}`, shards: args.shards });
    p.track.index = index;
    const before = await usedMemory(p.redisAdmin);
    t = performance.now();
    await loadRedis(db, index, total);
    const redisLoadSeconds = (performance.now() - t) / 1000;
    const after = await usedMemory(p.redisAdmin);
    let keyBytes = 0;
    for (const k of index.layout.shardKeys) keyBytes += Number((await p.redisAdmin.send("MEMORY", ["USAGE", k, "SAMPLES", "0"])) ?? 0);
    const encoding = String(await p.redisAdmin.send("OBJECT", ["ENCODING", index.layout.shardKeys[0]]));
    const redisSize = await index.size();
    if (redisSize !== total) p.problems.push(`size ${size}: Redis holds ${redisSize} entries, expected ${total}`);

    const sql = new SqlDueIndex(db);
    const sqlSize = await sql.size();
    if (sqlSize !== total) p.problems.push(`size ${size}: SQL index holds ${sqlSize} entries, expected ${total}`);

    const indexes: [Row["index"], DueIndex][] = [
      ["sql", sql],
      ["redis", index],
    ];
    const dueCall = (ix: DueIndex) => () => ix.dueList({ dueBy: Date.now(), limit: args.limit });
    const emptyCall = (ix: DueIndex) => () => ix.dueList({ dueBy: Date.now() - DAY_MS, limit: args.limit });

    // Both must give the same answer, or the timing compares different work.
    const [[, a], [, b]] = [await timed(dueCall(sql)), await timed(dueCall(index))];
    const expect = Math.min(args.due, args.limit);
    if (a.length !== expect || b.length !== expect)
      p.problems.push(`size ${size}: dueList returned sql ${a.length} / redis ${b.length} entries, expected ${expect}`);
    if (JSON.stringify(a) !== JSON.stringify(b)) p.problems.push(`size ${size}: SQL and Redis dueList answers differ`);

    say(`  measuring: ${args.warmup} warm-up + ${args.reps} calls per index and kind, interleaved`);
    for (let i = 0; i < args.warmup; i++) {
      for (const [, ix] of indexes) {
        await dueCall(ix)();
        await emptyCall(ix)();
      }
    }
    const samples = { sql: { due: [] as number[], empty: [] as number[] }, redis: { due: [] as number[], empty: [] as number[] } };
    for (let i = 0; i < args.reps; i++) {
      for (const [name, ix] of indexes) {
        const [ms, r] = await timed(dueCall(ix));
        if (r.length !== expect) p.problems.push(`size ${size}: ${name} dueList returned ${r.length} entries`);
        samples[name].due.push(ms);
      }
      for (const [name, ix] of indexes) {
        const [ms, r] = await timed(emptyCall(ix));
        if (r.length !== 0) p.problems.push(`size ${size}: ${name} empty discovery returned ${r.length} entries`);
        samples[name].empty.push(ms);
      }
    }

    // How the server ran it: the plan cache of this session's prepared statement, then one
    // EXPLAIN ANALYZE with the value inlined (a custom plan).
    let preparedPlans: SizeExtras["preparedPlans"];
    try {
      const [ps] = await db.query<{ generic_plans: string; custom_plans: string }>(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%ORDER BY due_at, id%' LIMIT 1",
      );
      if (ps) preparedPlans = { generic: Number(ps.generic_plans), custom: Number(ps.custom_plans) };
    } catch {
      // pg_prepared_statements has the plan counters from PostgreSQL 14 on.
    }
    const dueQuery = (dueBy: string, limit: string) => `SELECT id, due_at FROM jobs
       WHERE status = 'scheduled' AND due_at <= timestamptz 'epoch' + ${dueBy}::bigint * interval '1 millisecond'
       ORDER BY due_at, id LIMIT ${limit}`;
    const explain = async (sqlText: string) =>
      (await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF) ${sqlText}`)).map((r) => r["QUERY PLAN"]).join("\n");
    const plan = await explain(dueQuery(String(Date.now()), String(args.limit)));
    // The generic plan, as a prepared statement gets it once the plan cache switches over.
    await db.exec(`SET plan_cache_mode = force_generic_plan; PREPARE bench_due(bigint, int) AS ${dueQuery("$1", "$2")}`);
    const genericPlan = await explain(`EXECUTE bench_due(${Date.now()}, ${args.limit})`);
    await db.exec("DEALLOCATE bench_due; RESET plan_cache_mode");

    const rows: Row[] = [
      {
        size,
        due: args.due,
        index: "sql",
        dueList: latency(samples.sql.due),
        empty: latency(samples.sql.empty),
        memoryBytes: pgIndexBytes,
        memoryWhat: "pg_relation_size('jobs_status_due_at')",
        loadSeconds: insertSeconds + vacuumSeconds,
      },
      {
        size,
        due: args.due,
        index: "redis",
        dueList: latency(samples.redis.due),
        empty: latency(samples.redis.empty),
        memoryBytes: after - before,
        memoryWhat: "INFO memory used_memory, after load - before",
        keyBytes,
        loadSeconds: redisLoadSeconds,
      },
    ];
    say(`  sql due p50 ${rows[0].dueList.p50.toFixed(3)} ms, redis due p50 ${rows[1].dueList.p50.toFixed(3)} ms`);

    await index.clear();
    await deleteKeys(p.redisAdmin, `${p.prefix}:${size}`);
    await index.close();
    p.track.index = undefined;
    return {
      rows,
      extras: { size, tableBytes: Number(sz.tbl), plan, genericPlan, preparedPlans, redisEncoding: encoding, insertSeconds, vacuumSeconds },
    };
  } finally {
    await db.close();
    await dropDatabase(dbUrl).catch((err) => say(`bench: could not drop ${dbUrl}: ${(err as Error).message}`));
    p.track.dbUrl = undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (n: number) => (n >= 10 ? n.toFixed(1) : n.toFixed(2));
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** "Limit > Sort > Bitmap Heap Scan on jobs > ..., rows read N, buffers hit N": plan nodes, outermost first. */
function summarizePlan(plan: string): string {
  const lines = plan.split("\n");
  const nodes = lines.filter((l) => /\(cost=/.test(l)).map((l) => l.replace(/^\s*(->\s*)?/, "").replace(/\s+\(cost=.*$/, ""));
  const buffers = /shared hit=(\d+)(?: read=(\d+))?/.exec(lines.find((l) => /Buffers:/.test(l)) ?? "");
  const leaf = [...lines].reverse().find((l) => /\(cost=/.test(l));
  const leafRows = /actual rows=(\d+)/.exec(leaf ?? "")?.[1];
  return `${nodes.join(" > ")}; innermost node returned ${leafRows ?? "?"} rows; buffers hit=${buffers?.[1] ?? "?"}${buffers?.[2] ? ` read=${buffers[2]}` : ""}`;
}

function resultTable(rows: Row[]): string {
  return table(
    ["size", "index", "due p50 ms", "p99 ms", "mean ms", "calls/s", "empty p50 ms", "p99 ms", "calls/s", "memory", "bytes/job"],
    rows.map((r) => [
      String(r.size),
      r.index,
      ms(r.dueList.p50),
      ms(r.dueList.p99),
      ms(r.dueList.mean),
      r.dueList.callsPerSecond.toFixed(0),
      ms(r.empty.p50),
      ms(r.empty.p99),
      r.empty.callsPerSecond.toFixed(0),
      mib(r.memoryBytes),
      (r.memoryBytes / (r.size + r.due)).toFixed(0),
    ]),
  );
}

interface ServerInfo {
  pgVersion: string;
  pgSettings: string;
  redisVersion: string;
  redisAllocator: string;
}

function report(a: Args, rows: Row[], extras: SizeExtras[], machine: Machine, s: ServerInfo, problems: string[]): void {
  const planLine = (x: SizeExtras) => {
    const cache = x.preparedPlans ? `; the bench's prepared statement ran ${x.preparedPlans.generic} generic / ${x.preparedPlans.custom} custom plans` : "";
    return [`${String(x.size).padStart(8)}  custom:  ${summarizePlan(x.plan)}`, `${" ".repeat(8)}  generic: ${summarizePlan(x.genericPlan)}${cache}`];
  };
  const out = [
    "",
    `due discovery: dueList({ dueBy: now, limit: ${a.limit} }) with ${a.due} jobs due among N pending future jobs;`,
    `empty = dueBy now - 1 day (nothing due). ${a.reps} calls each after ${a.warmup} warm-up, one caller, interleaved;`,
    `calls/s = 1000 / mean. Redis: Bun RedisClient, ${a.shards} shards. memory: sql = pg_relation_size('jobs_status_due_at'),`,
    `redis = used_memory delta of the load; bytes/job = memory / (N + due).`,
    "",
    resultTable(rows),
    "",
    "plans of the due query (EXPLAIN ANALYZE; custom = values inlined, generic = prepared, plan_cache_mode=force_generic_plan):",
    ...extras.flatMap(planLine),
    `jobs table incl. indexes: ${extras.map((x) => `${x.size}: ${mib(x.tableBytes)}`).join(", ")}`,
    `redis encoding: ${[...new Set(extras.map((x) => x.redisEncoding))].join(", ")}; MEMORY USAGE of the shard keys: ${rows
      .filter((r) => r.index === "redis")
      .map((r) => `${r.size}: ${mib(r.keyBytes ?? 0)}`)
      .join(", ")}`,
    `load: ${extras.map((x, i) => `${x.size}: postgres ${x.insertSeconds.toFixed(1)} s + vacuum analyze ${x.vacuumSeconds.toFixed(1)} s, redis ${rows.filter((r) => r.index === "redis")[i].loadSeconds.toFixed(1)} s`).join("; ")}`,
    "",
    keyValues([
      ["cpu", machine.cpu],
      ["cores", String(machine.cores)],
      ["memory", machine.memory],
      ["os", machine.os],
      ["bun", machine.bun],
      ["postgres", s.pgVersion],
      ["pg settings", s.pgSettings],
      ["redis", `${s.redisVersion} (${s.redisAllocator})`],
      ["drivers", machine.driver],
    ]),
    "",
    problems.length === 0
      ? "OK: SQL and Redis returned the same due jobs; every empty discovery was empty"
      : `FAILED:\n${problems.map((x) => `  ${x}`).join("\n")}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  let args: Args | undefined;
  try {
    args = parse(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      say(`bench: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!args) return 0;
  const adminUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
  const redisUrl = process.env.TEST_REDIS_URL || process.env.REDIS_URL;
  if (!adminUrl || !redisUrl) {
    say("bench: needs PostgreSQL (TEST_DATABASE_URL or DATABASE_URL) and Redis (TEST_REDIS_URL or REDIS_URL);");
    say("       bash scripts/with-services.sh node_modules/.bin/bun bench/index-discovery.ts starts throwaway ones");
    return 2;
  }
  process.env.TEST_DATABASE_URL = adminUrl; // createDatabase/dropDatabase read it

  const prefix = `bench:index-discovery:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  const redisAdmin = new RedisClient(redisUrl, { connectionTimeout: 2000, maxRetries: 3 });
  await redisAdmin.connect();
  const track: { dbUrl?: string; index?: DueIndex } = {};
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      if (track.dbUrl) await dropDatabase(track.dbUrl).catch((err) => say(`bench: could not drop ${track.dbUrl}: ${(err as Error).message}`));
      const n = await deleteKeys(redisAdmin, prefix).catch((err) => {
        say(`bench: could not delete the Redis keys under ${prefix}: ${(err as Error).message}`);
        return 0;
      });
      if (n > 0) say(`bench: deleted ${n} leftover Redis keys under ${prefix}`);
      await track.index?.close().catch(() => {});
      redisAdmin.close();
    })());
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    interrupted = true;
    say(`bench: ${sig}: dropping the database and deleting the Redis keys`);
    cleanup().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  try {
    const info = openPostgres({ url: adminUrl, maxConnections: 1 });
    let server: ServerInfo;
    try {
      const [{ version }] = await info.query<{ version: string }>("SELECT version() AS version");
      const pg = await describeServer((q) => info.query(q));
      const planner: string[] = [];
      for (const n of ["random_page_cost", "jit"]) planner.push(`${n}=${(await info.query<{ v: string }>(`SELECT current_setting('${n}') AS v`))[0].v}`);
      server = {
        pgVersion: version,
        pgSettings: `${settingsLine(pg)}; ${planner.join(" ")}`,
        redisVersion: `Redis ${(await infoField(redisAdmin, "server", "redis_version")) ?? "?"}`,
        redisAllocator: (await infoField(redisAdmin, "memory", "mem_allocator")) ?? "?",
      };
    } finally {
      await info.close();
    }
    say(`bench: ${server.pgVersion.split(" on ")[0]}, ${server.redisVersion}; Redis keys under ${prefix}:`);

    const rows: Row[] = [];
    const extras: SizeExtras[] = [];
    const problems: string[] = [];
    for (const size of args.sizes) {
      const r = await runSize({ size, args, redisUrl, redisAdmin, prefix, track, problems });
      rows.push(...r.rows);
      extras.push(r.extras);
    }
    const machine = describeMachine(server.pgVersion, `postgres.js ${packageVersion("postgres")}, Bun RedisClient`);
    report(args, rows, extras, machine, server, problems);
    if (args.json) {
      writeFileSync(
        args.json,
        `${JSON.stringify(
          {
            when: new Date().toISOString(),
            settings: { sizes: args.sizes, due: args.due, limit: args.limit, reps: args.reps, warmup: args.warmup, shards: args.shards },
            results: rows,
            sizes: extras,
            machine,
            servers: server,
            problems,
            ok: problems.length === 0,
          },
          null,
          2,
        )}\n`,
      );
      say(`bench: figures written to ${args.json}`);
    }
    return problems.length === 0 ? 0 : 1;
  } catch (err) {
    if (interrupted) return 130;
    say(`bench: FAILED: ${(err as Error).stack ?? err}`);
    return 1;
  } finally {
    await cleanup();
  }
}

process.exit(await main());
