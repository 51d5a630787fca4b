/**
 * The three systems bench/peers.ts compares, behind one shape: make room for a scenario, create
 * jobs due at given instants, start and stop the process that delivers them. Every system's
 * worker runs in its own process so its memory and its database connections are its own.
 */
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { RedisClient } from "bun";
import { createBunRedisClient, Queue } from "bullmq";
import { makeWorkerUtils, type WorkerUtils } from "graphile-worker";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../../test/helpers/db.ts";
import { createJobs } from "../lib/create-jobs.ts";
import { procCpuSeconds, procMemoryBytes, SchedulerProcess } from "../lib/scheduler-process.ts";
import { threadCpuSeconds, type ThreadCpu } from "../lib/thread-cpu.ts";
import type { PeerPayload } from "./post.ts";

const ROOT = join(import.meta.dir, "..", "..");

export interface Created {
  /** The key each job's calls carry in webhook-id → its due time (ms since the epoch). */
  due: Map<string, number>;
  seconds: number;
  /** Jobs whose creation finished only after they were due. */
  late: number;
}

export interface SystemContext {
  targetUrl: string;
  concurrency: number;
  logFile: string;
  redisUrl?: string;
}

export interface System {
  readonly name: string;
  /** The database this system's scenario runs in (its commits are counted there); none for BullMQ. */
  readonly database?: string;
  /** A fresh database or queue for one scenario. */
  setup(scenario: string): Promise<void>;
  /** Creates one job per due time. Without a running worker (the burst), creation leaves no connection open. */
  create(dues: number[], tag: string): Promise<Created>;
  /** Starts the delivering process set; resolves once it takes jobs. */
  start(): Promise<void>;
  assertAlive(): void;
  /** Peak resident memory of the process set so far (sum of each process's VmHWM), bytes. */
  peakRss(): number | undefined;
  /** CPU seconds (user + system) the delivering process has used so far. */
  cpuSeconds(): number | undefined;
  /** The same by the process's threads. */
  threadCpuSeconds(): ThreadCpu | undefined;
  /** Stops the process set gracefully; its exit code (non-zero if any failed). */
  stop(): Promise<number>;
  /** Drops what setup made. */
  teardown(): Promise<void>;
  /** Any extra figure of the last scenario (e.g. Redis commands per job), printed as is. */
  extra?(): Promise<Record<string, number>>;
}

/** A peer's worker script (bench/peers/NAME.ts) in its own Bun process. */
class PeerProcess {
  private code: number | undefined;
  private constructor(readonly proc: Subprocess<"ignore", "pipe", number>) {
    proc.exited.then((c) => (this.code = c));
  }

  static async start(script: string, env: Record<string, string>, logFile: string): Promise<PeerProcess> {
    const fd = openSync(logFile, "a");
    let proc;
    try {
      proc = Bun.spawn([process.execPath, join(ROOT, "bench/peers", script)], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
        stdin: "ignore",
        stdout: "pipe",
        stderr: fd,
      });
    } finally {
      closeSync(fd);
    }
    const p = new PeerProcess(proc);
    // It prints "ready" once it takes jobs, and nothing else.
    const reader = proc.stdout.getReader();
    let seen = "";
    const deadline = Date.now() + 30_000;
    while (!seen.includes("ready\n")) {
      const r = await Promise.race([reader.read(), Bun.sleep(Math.max(0, deadline - Date.now())).then(() => "timeout" as const)]);
      if (r === "timeout" || r.done) {
        proc.kill("SIGKILL");
        throw new Error(`${script} did not become ready (${r === "timeout" ? "30 s" : `exited with ${await proc.exited}`}); see ${logFile}`);
      }
      seen += new TextDecoder().decode(r.value);
    }
    reader.releaseLock();
    return p;
  }

  assertAlive(name: string): void {
    if (this.code !== undefined) throw new Error(`the ${name} worker exited with code ${this.code}`);
  }

  async stop(ms = 30_000): Promise<number> {
    if (this.code !== undefined) return this.code;
    this.proc.kill("SIGTERM");
    const r = await Promise.race([this.proc.exited, Bun.sleep(ms).then(() => "timeout" as const)]);
    if (r === "timeout") {
      this.proc.kill("SIGKILL");
      await this.proc.exited;
      return 137;
    }
    return r;
  }
}

/** Runs `fn` over the chunks, `parallel` at a time (the way the scheduler's jobs are created: 1000 a request, 2 in flight). */
async function inChunks<T>(items: T[], size: number, parallel: number, fn: (chunk: T[], offset: number) => Promise<void>): Promise<void> {
  let next = 0;
  const run = async () => {
    while (next * size < items.length) {
      const c = next++;
      await fn(items.slice(c * size, (c + 1) * size), c * size);
    }
  };
  await Promise.all(Array.from({ length: parallel }, run));
}

function keyed(prefix: string, dues: number[]): { k: string; due: number }[] {
  return dues.map((due, i) => ({ k: `${prefix}-${i}`, due }));
}

function lateOf(due: Map<string, number>, endedAt: number): number {
  let late = 0;
  for (const at of due.values()) if (at < endedAt) late++;
  return late;
}

/** What every system whose delivering process this bench spawned shares: its CPU time, its stop. */
abstract class OwnProcess<P extends { readonly proc: { readonly pid: number }; stop(): Promise<number> }> {
  protected proc?: P;

  cpuSeconds(): number | undefined {
    return this.proc ? procCpuSeconds(this.proc.proc.pid) : undefined;
  }

  threadCpuSeconds(): ThreadCpu | undefined {
    return this.proc ? threadCpuSeconds(this.proc.proc.pid) : undefined;
  }

  async stop(): Promise<number> {
    const p = this.proc;
    this.proc = undefined;
    return p ? p.stop() : 0;
  }
}

export class SchedulerSystem extends OwnProcess<SchedulerProcess> implements System {
  readonly name = "scheduler";
  private url?: string;
  constructor(private readonly ctx: SystemContext) {
    super();
  }

  get database(): string | undefined {
    return this.url ? new URL(this.url).pathname.slice(1) : undefined;
  }

  async setup(): Promise<void> {
    this.url = await createDatabase();
  }

  async create(dues: number[], tag: string): Promise<Created> {
    // Without a delivering process (the burst), an API-only process creates the jobs and stops,
    // so the backlog is all there when delivery starts, through the same public API.
    const api = this.proc ?? (await this.spawn("api"));
    let created: Created;
    let code = 0;
    try {
      const started = Date.now();
      const c = await createJobs({ schedulerUrl: api.url, targetUrl: this.ctx.targetUrl, dueTimes: dues, batch: 1000, parallel: 2, tag });
      created = { due: c.due, seconds: (c.endedAt - started) / 1000, late: this.proc ? c.createdLate : 0 };
    } finally {
      if (api !== this.proc) code = await api.stop();
    }
    // After the finally, so that a failed creation's own error is the one reported.
    if (code !== 0) throw new Error(`the API-only scheduler exited with code ${code}`);
    return created;
  }

  private async spawn(mode: "api" | "all"): Promise<SchedulerProcess> {
    const p = await SchedulerProcess.start({ databaseUrl: this.url, concurrency: this.ctx.concurrency, logLevel: "warn", logFile: this.ctx.logFile, mode });
    await p.waitReady(60_000);
    return p;
  }

  async start(): Promise<void> {
    this.proc = await this.spawn("all");
  }

  assertAlive(): void {
    this.proc?.assertAlive();
  }

  peakRss(): number | undefined {
    return this.proc?.peakRssBytes();
  }

  async teardown(): Promise<void> {
    this.proc?.kill();
    this.proc = undefined;
    if (this.url) await dropDatabase(this.url).catch(() => {});
    this.url = undefined;
  }
}

/** What every peer delivering from its own process (bench/peers/NAME.ts) shares: liveness and memory, beside CPU and stop. */
abstract class ProcessPeer extends OwnProcess<PeerProcess> {
  abstract readonly name: string;

  assertAlive(): void {
    this.proc?.assertAlive(this.name);
  }

  peakRss(): number | undefined {
    return this.proc ? procMemoryBytes(this.proc.proc.pid, "VmHWM") : undefined;
  }

  /** Kills a process still running (a failed scenario). */
  protected kill(): void {
    if (this.proc) this.proc.proc.kill("SIGKILL");
    this.proc = undefined;
  }
}

/** A process peer that keeps its jobs in PostgreSQL: a fresh database each scenario, dropped after it. */
abstract class DatabasePeer extends ProcessPeer {
  protected url?: string;
  protected scenario = "";
  constructor(protected readonly ctx: SystemContext) {
    super();
  }

  get database(): string | undefined {
    return this.url ? new URL(this.url).pathname.slice(1) : undefined;
  }

  protected async freshDatabase(scenario: string): Promise<string> {
    this.scenario = scenario;
    this.url = await createDatabase();
    return this.url;
  }

  async teardown(): Promise<void> {
    this.kill();
    if (this.url) await dropDatabase(this.url).catch(() => {});
    this.url = undefined;
  }
}

export class GraphileSystem extends DatabasePeer implements System {
  readonly name = "graphile-worker";

  async setup(scenario: string): Promise<void> {
    await this.freshDatabase(scenario);
    const utils = await makeWorkerUtils({ connectionString: this.url });
    try {
      await utils.migrate();
    } finally {
      await utils.release();
    }
  }

  async create(dues: number[], tag: string): Promise<Created> {
    const jobs = keyed(`gw-${this.scenario}-${tag}`, dues);
    let utils: WorkerUtils | undefined;
    const started = Date.now();
    try {
      utils = await makeWorkerUtils({ connectionString: this.url, maxPoolSize: 2 });
      const u = utils;
      await inChunks(jobs, 1000, 2, async (chunk) => {
        await u.addJobs(chunk.map((j) => ({ identifier: "post", payload: j satisfies PeerPayload, runAt: new Date(j.due) })));
      });
    } finally {
      await utils?.release();
    }
    const due = new Map(jobs.map((j) => [j.k, j.due]));
    return { due, seconds: (Date.now() - started) / 1000, late: this.proc ? lateOf(due, Date.now()) : 0 };
  }

  async start(): Promise<void> {
    this.proc = await PeerProcess.start(
      "graphile-worker.ts",
      {
        DATABASE_URL: this.url!,
        PEER_TARGET_URL: this.ctx.targetUrl,
        PEER_CONCURRENCY: String(this.ctx.concurrency),
      },
      this.ctx.logFile,
    );
  }
}

/** INFO section field of a Redis server. */
async function redisInfo(client: RedisClient, section: string, field: string): Promise<string | undefined> {
  const text = String(await client.send("INFO", [section]));
  return new RegExp(`^${field}:(.*)$`, "m").exec(text)?.[1]?.trim();
}

export class BullmqSystem extends ProcessPeer implements System {
  readonly name = "BullMQ";
  readonly database = undefined;
  private queueName = "";
  private admin?: RedisClient;
  private commandsAtStart = 0;
  private created = 0;
  constructor(private readonly ctx: SystemContext) {
    super();
    if (!ctx.redisUrl) throw new Error("BullMQ needs Redis: set REDIS_URL or TEST_REDIS_URL (npm run bench:peers starts one)");
  }

  async setup(scenario: string): Promise<void> {
    this.queueName = `peers-${scenario}-${process.pid}-${Date.now().toString(36)}`;
    this.admin ??= new RedisClient(this.ctx.redisUrl!);
    await this.admin.connect();
  }

  async create(dues: number[], tag: string): Promise<Created> {
    const jobs = keyed(`bq-${this.queueName}-${tag}`, dues);
    const queue = new Queue(this.queueName, { connection: createBunRedisClient(new RedisClient(this.ctx.redisUrl!)) });
    const started = Date.now();
    try {
      await inChunks(jobs, 1000, 2, async (chunk) => {
        const now = Date.now();
        await queue.addBulk(
          chunk.map((j) => ({
            name: "post",
            data: j satisfies PeerPayload,
            opts: { delay: Math.max(0, j.due - now), removeOnComplete: true, removeOnFail: 1000 },
          })),
        );
      });
    } finally {
      await queue.close();
    }
    this.created = jobs.length;
    const due = new Map(jobs.map((j) => [j.k, j.due]));
    return { due, seconds: (Date.now() - started) / 1000, late: this.proc ? lateOf(due, Date.now()) : 0 };
  }

  async start(): Promise<void> {
    this.commandsAtStart = Number((await redisInfo(this.admin!, "stats", "total_commands_processed")) ?? 0);
    this.proc = await PeerProcess.start(
      "bullmq.ts",
      {
        REDIS_URL: this.ctx.redisUrl!,
        PEER_TARGET_URL: this.ctx.targetUrl,
        PEER_CONCURRENCY: String(this.ctx.concurrency),
        PEER_QUEUE: this.queueName,
      },
      this.ctx.logFile,
    );
  }

  /** Redis's own peak RSS (it serves only BullMQ in this bench) and the commands it ran per created job, start to stop. */
  async extra(): Promise<Record<string, number>> {
    const commands = Number((await redisInfo(this.admin!, "stats", "total_commands_processed")) ?? 0) - this.commandsAtStart;
    const pid = Number(await redisInfo(this.admin!, "server", "process_id"));
    const rss = procMemoryBytes(pid, "VmHWM");
    return { redis_commands_per_job: this.created ? commands / this.created : NaN, redis_peak_rss_mib: rss === undefined ? NaN : rss / 2 ** 20 };
  }

  async teardown(): Promise<void> {
    this.kill();
    if (this.admin && this.queueName) {
      // Only this scenario's keys: never FLUSHALL a server that may be someone's.
      let cursor = "0";
      do {
        const [next, keys] = (await this.admin.send("SCAN", [cursor, "MATCH", `bull:${this.queueName}:*`, "COUNT", "1000"])) as [string, string[]];
        cursor = next;
        if (keys.length) await this.admin.send("UNLINK", keys);
      } while (cursor !== "0");
    }
  }

  close(): void {
    this.admin?.close();
  }
}

/**
 * The design's floor (bench/peers/design-floor.ts): the issue's minimal loop in its own process,
 * on a table of its own in a fresh database. Not a peer: its column shows what no
 * implementation of the design can beat in the same run, and its ratio is to the best peer.
 */
/** The design floor's name in bench:peers (--systems, the table): not a peer. */
export const DESIGN_FLOOR = "design-floor";

export class DesignFloorSystem extends DatabasePeer implements System {
  readonly name = DESIGN_FLOOR;

  async setup(scenario: string): Promise<void> {
    const sql = postgres(await this.freshDatabase(scenario), { max: 1, onnotice: () => {} });
    try {
      await sql`CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, status text NOT NULL, due_at timestamptz NOT NULL,
        lease_owner text, lease_generation int NOT NULL DEFAULT 0, lease_until timestamptz, attempts int NOT NULL DEFAULT 0,
        body jsonb NOT NULL, finished_at timestamptz)`;
      await sql`CREATE INDEX floor_jobs_scheduled_due ON floor_jobs (due_at, id) WHERE status = 'scheduled'`;
    } finally {
      await sql.end();
    }
  }

  async create(dues: number[], tag: string): Promise<Created> {
    const jobs = keyed(`df-${this.scenario}-${tag}`, dues);
    const sql = postgres(this.url!, { max: 2, onnotice: () => {} });
    const started = Date.now();
    try {
      await inChunks(jobs, 1000, 2, async (chunk) => {
        await sql`INSERT INTO floor_jobs (status, due_at, body)
          SELECT 'scheduled', to_timestamp(j.due / 1000.0), jsonb_build_object('k', j.k, 'due', j.due)
          FROM json_to_recordset(${JSON.stringify(chunk)}::text::json) AS j(k text, due float8)`;
      });
    } finally {
      await sql.end();
    }
    const due = new Map(jobs.map((j) => [j.k, j.due]));
    return { due, seconds: (Date.now() - started) / 1000, late: this.proc ? lateOf(due, Date.now()) : 0 };
  }

  async start(): Promise<void> {
    this.proc = await PeerProcess.start(
      "design-floor.ts",
      { DATABASE_URL: this.url!, PEER_TARGET_URL: this.ctx.targetUrl, PEER_CONCURRENCY: String(this.ctx.concurrency) },
      this.ctx.logFile,
    );
  }
}
