/**
 * The chaos cluster: a throwaway PostgreSQL of its own (initdb + pg_ctl, so it can be
 * restarted fast and immediate), a redis-server of its own (flushed, restarted, paused), and
 * the scheduler processes of both regions on them. Everything is undone by `close()`, and
 * by a process exit handler if the test process dies first.
 */
import { mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import postgres from "postgres";
import { Cleanup } from "../../src/region/drill/cleanup.ts";
import { findPgBin } from "../../src/region/drill/pg-bin.ts";
import { PgCluster } from "../../src/region/drill/pg-cluster.ts";
import { PgUser } from "../../src/region/drill/pg-user.ts";
import { ownRedis, type OwnRedis } from "../helpers/redis.ts";
import { seams } from "./seams.ts";
import { switchedFaultsEnv } from "./switched-faults.ts";
import { ManagedProc, PROCESSES, type Mode, type UnexpectedExit } from "./processes.ts";

/**
 * Short leases so that a SIGSTOP past them is quick: a worker's claim lapses after 2 s, a
 * shard or leader lease after 2 s, both trusted expired 1 s later (the skew margin); an async
 * job without a heartbeat for 3 s runs again. Region failover is by request only, so the
 * A → B → A fault decides when the authority moves.
 */
export const TIMINGS = {
  leaseTtlMs: 2000,
  leaderTtlMs: 2000,
  clockSkewMs: 1000,
  asyncLeaseMs: 3000,
};

export function schedulerEnv(databaseUrl: string, redisUrl: string, occurrenceLeadMs = 0): Record<string, string> {
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    HOME_REGION: "a",
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
    SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
    // The load fires per-second schedules (the production default minimum is 10 s).
    SCHEDULER_MIN_SCHEDULE_INTERVAL: "1s",
    SCHEDULER_LEASE_TTL: `${TIMINGS.leaseTtlMs}ms`,
    SCHEDULER_LEADER_TTL: `${TIMINGS.leaderTtlMs}ms`,
    SCHEDULER_AUTHORITY_TTL: "2s",
    SCHEDULER_CLOCK_SKEW: `${TIMINGS.clockSkewMs}ms`,
    SCHEDULER_ASYNC_LEASE: `${TIMINGS.asyncLeaseMs}ms`,
    SCHEDULER_POLL_INTERVAL: "200ms",
    SCHEDULER_SHUTDOWN_GRACE: "2s",
    SCHEDULER_AUTO_FAILOVER: "0",
    SCHEDULER_SHARDS: "4",
    SCHEDULER_INDEX_RECONCILE: "2s",
    WORKER_CONCURRENCY: "30",
    SCHEDULER_OCCURRENCE_LEAD: `${occurrenceLeadMs}ms`,
  };
  for (const k of ["PATH", "HOME", "TMPDIR", "LANG"]) if (process.env[k]) env[k] = process.env[k]!;
  return env;
}

export class ChaosCluster {
  readonly cleanup = new Cleanup();
  pg!: PgCluster;
  redis!: OwnRedis;
  procs = new Map<string, ManagedProc>();
  readonly unexpectedExits: UnexpectedExit[] = [];
  databaseUrl = "";
  logDir = "";
  private workDir = "";
  private sql: postgres.Sql | undefined;
  private onExit = () => this.cleanup.runSync();

  /** `occurrenceLeadMs`: SCHEDULER_OCCURRENCE_LEAD for every process (occurrences made that far ahead). */
  async start(say: (line: string) => void, occurrenceLeadMs = 0): Promise<void> {
    process.on("exit", this.onExit);
    const user = await PgUser.detect();
    const bin = findPgBin(undefined);
    this.workDir = await user.makeTempDir("scheduler-chaos-");
    this.cleanup.add(
      "work dir",
      () => rmSync(this.workDir, { recursive: true, force: true }),
      () => rmSync(this.workDir, { recursive: true, force: true }),
    );
    this.logDir = join(this.workDir, "logs");
    mkdirSync(this.logDir);
    user.own(this.logDir);
    this.pg = new PgCluster({
      name: "chaos",
      bin,
      user,
      dataDir: join(this.workDir, "pg"),
      socketDir: this.workDir,
      logFile: join(this.logDir, "postgres.log"),
    });
    this.cleanup.add(
      "postgres",
      () => this.pg.stop("immediate"),
      () => this.pg.stopSync(),
    );
    await this.pg.initdb();
    // fsync off: an immediate stop is a crash of PostgreSQL, not of the machine, so the WAL
    // in the page cache survives it; synchronous_commit stays on.
    // authentication_timeout: a stop waits for every child, including those only refusing a
    // connection ("shutting down") that wait for the client's startup packet; with the
    // default 60 s a stop took 30 s here, which hid most of a short round behind one fault.
    this.pg.appendConf({
      listen_addresses: "127.0.0.1",
      unix_socket_directories: this.workDir,
      fsync: "off",
      max_connections: 300,
      shared_buffers: "64MB",
      authentication_timeout: "2s",
    });
    await this.pg.start();
    await this.pg.sql("create database scheduler");
    this.databaseUrl = this.pg.url("scheduler");
    this.redis = await ownRedis();
    this.cleanup.add(
      "redis",
      () => this.redis.kill(),
      () => void this.redis.kill(),
    );
    say(`postgres 127.0.0.1:${this.pg.port} (${bin}), redis 127.0.0.1:${this.redis.port}, logs ${this.logDir}`);

    const haveSwitch = seams().faultSwitch;
    for (const spec of PROCESSES) {
      const env = () => ({
        ...schedulerEnv(this.databaseUrl, this.redis.url, occurrenceLeadMs),
        ...(spec.region === "a" ? switchedFaultsEnv(spec.mode, haveSwitch) : {}),
      });
      const p = new ManagedProc(spec, env, this.logDir, (e) => this.unexpectedExits.push(e));
      this.procs.set(spec.name, p);
      this.cleanup.add(
        `scheduler ${spec.name}`,
        () => p.stop(),
        () => p.proc?.kill("SIGKILL"),
      );
    }
    // The first one migrates; the others then start together.
    const [first, ...rest] = [...this.procs.values()];
    await first!.start();
    await Promise.all(rest.map((p) => p.start()));
    say(`schedulers: ${[...this.procs.values()].map((p) => `${p.name} :${p.port}`).join(", ")}`);
  }

  proc(name: string): ManagedProc {
    const p = this.procs.get(name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  /** The processes of region a that run `mode` (b-all for "all"). */
  ofMode(mode: Mode): ManagedProc[] {
    return [...this.procs.values()].filter((p) => p.spec.mode === mode);
  }

  /** Region → its API's base URL. */
  apis(): Map<string, string> {
    return new Map([
      ["a", this.proc("a-api").url],
      ["b", this.proc("b-all").url],
    ]);
  }

  /** A connection of the harness's own (checks, fault queries); reconnects after a restart. */
  db(): postgres.Sql {
    this.sql ??= postgres(this.databaseUrl, {
      max: 2,
      onnotice: () => {},
      connect_timeout: 5,
      idle_timeout: 5,
      connection: { application_name: "chaos-harness" },
    });
    return this.sql;
  }

  /** pg_ctl stop (fast or immediate), down for downMs, start again on the same port. */
  async restartPostgres(mode: "fast" | "immediate", downMs: number): Promise<void> {
    const port = this.pg.port;
    await this.pg.stop(mode);
    await Bun.sleep(downMs);
    await this.pg.start({ port });
    if (this.pg.port !== port)
      throw new Error(`postgres came back on port ${this.pg.port}, not ${port} (taken meanwhile): the schedulers' DATABASE_URL no longer reaches it`);
  }

  /** pg_terminate_backend on every scheduler connection; how many went. */
  async killBackends(): Promise<number> {
    const rows = await this.pg.sql<{ n: string }>(
      "select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity where datname = 'scheduler' and application_name like 'scheduler-%'",
    );
    return Number(rows[0]?.n ?? 0);
  }

  async close(): Promise<string[]> {
    const sql = this.sql;
    this.sql = undefined;
    await sql?.end({ timeout: 1 }).catch(() => {});
    const failures = await this.cleanup.run();
    process.off("exit", this.onExit);
    return failures;
  }

  /** Keeps the logs (a failed round) by copying them out of the work dir before it goes. */
  keepLogs(to: string): void {
    rmSync(to, { recursive: true, force: true });
    mkdirSync(dirname(to), { recursive: true });
    Bun.spawnSync(["cp", "-r", this.logDir, to]);
  }
}
