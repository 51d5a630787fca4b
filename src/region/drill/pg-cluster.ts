import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { DrillError } from "./errors.ts";
import type { PgUser } from "./pg-user.ts";
import { freePort } from "./ports.ts";
import { lastLines, run, runOk } from "./run.ts";

export interface PgClusterOptions {
  /** "primary" or "standby": names it in messages. */
  name: string;
  /** Directory of initdb, pg_ctl, postgres, pg_basebackup. */
  bin: string;
  user: PgUser;
  dataDir: string;
  /** Unix socket directory (ours, not /var/run/postgresql). */
  socketDir: string;
  /** Server log (pg_ctl -l); named in errors. */
  logFile: string;
}

/** One PostgreSQL data directory and its server on 127.0.0.1, driven through pg_ctl. */
export class PgCluster {
  port = 0;

  constructor(readonly o: PgClusterOptions) {}

  get name(): string {
    return this.o.name;
  }

  url(db = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${db}`;
  }

  /** Whether a postmaster may be running (its pid file exists). */
  get mayRun(): boolean {
    return existsSync(join(this.o.dataDir, "postmaster.pid"));
  }

  private prog(name: string): string {
    return join(this.o.bin, name);
  }

  /** initdb with trust auth for superuser postgres, UTF8 and the C locale. */
  async initdb(): Promise<void> {
    await runOk(
      `initdb (${this.name}, ${this.o.dataDir})`,
      this.o.user.cmd([this.prog("initdb"), "-D", this.o.dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"]),
    );
  }

  /** Appends settings to postgresql.conf (pg_basebackup copies them to a standby). */
  appendConf(settings: Record<string, string | number>): void {
    const lines = Object.entries(settings).map(([k, v]) => `${k} = ${typeof v === "number" ? v : `'${v.replaceAll("'", "''")}'`}`);
    appendFileSync(join(this.o.dataDir, "postgresql.conf"), `\n# scheduler drill\n${lines.join("\n")}\n`);
  }

  /** Appends to postgresql.auto.conf (read after postgresql.conf: later lines win). */
  appendAutoConf(settings: Record<string, string>): void {
    const lines = Object.entries(settings).map(([k, v]) => `${k} = '${v.replaceAll("'", "''")}'`);
    appendFileSync(join(this.o.dataDir, "postgresql.auto.conf"), `${lines.join("\n")}\n`);
  }

  /**
   * pg_ctl start -w on a free port (or `port`, to come back where it was); `settings` are
   * -c options for this start only (they override the configuration files). A port taken
   * between picking and binding is retried with another one.
   */
  async start(opts: { port?: number; settings?: Record<string, string> } = {}): Promise<void> {
    const starting = this.startOnce(opts);
    this.starting = starting.catch(() => {});
    await starting;
  }

  /** A start in flight: a stop waits for it, or the server would come up after the stop. */
  private starting: Promise<void> = Promise.resolve();

  private async startOnce(opts: { port?: number; settings?: Record<string, string> }): Promise<void> {
    const extra = Object.entries(opts.settings ?? {}).map(([k, v]) => `-c ${k}='${v.replaceAll("'", "")}'`);
    for (let attempt = 1; ; attempt++) {
      const port = attempt === 1 && opts.port ? opts.port : await freePort();
      const r = await run(
        this.o.user.cmd([this.prog("pg_ctl"), "-D", this.o.dataDir, "-l", this.o.logFile, "-w", "-t", "60", "-o", [`-p ${port}`, ...extra].join(" "), "start"]),
      );
      if (r.code === 0) {
        this.port = port;
        return;
      }
      const log = existsSync(this.o.logFile) ? readFileSync(this.o.logFile, "utf8") : "";
      if (attempt < 4 && /already in use/i.test(log.slice(-2000))) continue;
      throw new DrillError(
        `postgres ${this.name} did not start (pg_ctl exit ${r.code}): ${lastLines(log, 3) || lastLines(r.output, 3)} — log: ${this.o.logFile}`,
      );
    }
  }

  /** pg_ctl stop -m immediate: like a crash, no checkpoint, nothing flushed. */
  stopImmediate(): Promise<void> {
    return this.stop("immediate");
  }

  /**
   * pg_ctl stop: "fast" disconnects every client, rolls back and checkpoints; "immediate" is
   * like a crash (no checkpoint, recovery at the next start).
   */
  async stop(mode: "fast" | "immediate"): Promise<void> {
    await this.starting;
    if (!this.mayRun) return;
    const r = await run(this.o.user.cmd([this.prog("pg_ctl"), "-D", this.o.dataDir, "-m", mode, "-w", "-t", "30", "stop"]));
    if (r.code !== 0 && this.mayRun) throw new DrillError(`pg_ctl stop -m ${mode} (${this.name}) failed: ${lastLines(r.output, 3)}`);
  }

  /** For a process exit handler: SIGQUIT to the postmaster is an immediate shutdown. */
  stopSync(): void {
    try {
      const pid = Number(readFileSync(join(this.o.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
      if (pid > 0) process.kill(pid, "SIGQUIT");
    } catch {
      // not running
    }
  }

  /** One statement on a connection of its own. */
  async sql<T = Record<string, unknown>>(text: string, db = "postgres"): Promise<T[]> {
    const c = postgres(this.url(db), { max: 1, onnotice: () => {}, connect_timeout: 5, idle_timeout: 1, connection: { application_name: "scheduler-drill" } });
    try {
      return [...(await c.unsafe(text))] as unknown as T[];
    } finally {
      await c.end({ timeout: 1 });
    }
  }

  async inRecovery(): Promise<boolean> {
    const [row] = await this.sql<{ r: boolean }>("select pg_is_in_recovery() as r");
    return row.r;
  }

  /**
   * A streaming standby of `primary` in this data dir: pg_basebackup -R -X stream, with
   * application_name `appName` in primary_conninfo (what synchronous_standby_names names).
   */
  async basebackupFrom(primary: PgCluster, appName: string): Promise<void> {
    await runOk(
      `pg_basebackup (${this.name} from ${primary.name})`,
      this.o.user.cmd([
        this.prog("pg_basebackup"),
        "-D",
        this.o.dataDir,
        "-h",
        "127.0.0.1",
        "-p",
        String(primary.port),
        "-U",
        "postgres",
        "-X",
        "stream",
        "-R",
        "-c",
        "fast",
        "--no-sync",
      ]),
      { timeoutMs: 120_000 },
    );
    this.appendAutoConf({ primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres application_name=${appName}` });
  }

  /** pg_ctl promote, then waits until pg_is_in_recovery() is false. */
  async promote(timeoutMs = 30_000): Promise<void> {
    await runOk(
      `pg_ctl promote (${this.name})`,
      this.o.user.cmd([this.prog("pg_ctl"), "-D", this.o.dataDir, "-w", "-t", String(Math.ceil(timeoutMs / 1000)), "promote"]),
    );
    const end = Date.now() + timeoutMs;
    while (await this.inRecovery()) {
      if (Date.now() > end) throw new DrillError(`${this.name} still in recovery ${timeoutMs} ms after pg_ctl promote — log: ${this.o.logFile}`);
      await Bun.sleep(50);
    }
  }

  /** "15.8" from `postgres -V`. */
  async version(): Promise<string> {
    const out = await runOk("postgres -V", [this.prog("postgres"), "-V"]);
    return /(\d+(?:\.\d+)*)/.exec(out)?.[1] ?? out;
  }
}

/** Waits until `primary` streams to `appName` (and, when `sync`, with sync_state 'sync'). */
export async function waitForStandby(primary: PgCluster, appName: string, sync: boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = "no walsender";
  for (;;) {
    const rows = await primary.sql<{ state: string; sync_state: string }>(
      `select state, sync_state from pg_stat_replication where application_name = '${appName.replaceAll("'", "''")}'`,
    );
    if (rows[0]) {
      last = `state ${rows[0].state}, sync_state ${rows[0].sync_state}`;
      if (rows[0].state === "streaming" && (!sync || rows[0].sync_state === "sync")) return;
    }
    if (Date.now() > end) throw new DrillError(`standby '${appName}' not ${sync ? "synchronous" : "streaming"} after ${timeoutMs} ms (${last})`);
    await Bun.sleep(50);
  }
}
