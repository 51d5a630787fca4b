import { rmSync } from "node:fs";
import { join } from "node:path";
import { Cleanup } from "./cleanup.ts";
import type { Load } from "./load.ts";
import type { PgCluster } from "./pg-cluster.ts";
import type { PgUser } from "./pg-user.ts";
import { freePort } from "./ports.ts";
import type { DrillReport } from "./report.ts";
import { SchedulerProc, type LogLine } from "./scheduler-proc.ts";
import type { DrillTarget } from "./target.ts";
import { DEFAULT_TIMINGS, type DrillTimings, type FailoverDrillOptions, SCHEDULER_ENV } from "./settings.ts";

/** The log lines the drill waits for. */
export const STARTED = (l: LogLine) => l.msg === "scheduler started";
export const TOOK_OVER = (l: LogLine) => l.msg === "took over region authority";
export const WAITING_FOR_PROMOTION = (l: LogLine) => typeof l.msg === "string" && l.msg.startsWith("database is read-only");
/** The target path of the drill's schedule; the one-off jobs' paths start with /j/. */
export const SCHEDULE_PATH = "/s";

/**
 * What one failover drill has started and seen so far, shared by its phases (phase-*.ts,
 * run in order by drill.ts): the servers and processes to stop, the timings and notes of
 * the report, and the instants and generations the analysis needs.
 */
export class DrillState {
  readonly t: DrillTimings;
  readonly cleanup: Cleanup;
  readonly env: Record<string, string | undefined>;
  readonly t0 = Date.now();
  readonly phases: Record<string, number> = {};
  readonly notes: string[] = [];
  private readonly say: (line: string) => void;
  private phaseStart = Date.now();

  user!: PgUser;
  bin = "";
  pgVersion = "";
  work = "";
  logs = "";
  keepLogs = false;
  keptLogsAt: string | null = null;
  primary!: PgCluster;
  standby!: PgCluster;
  target: DrillTarget | undefined;
  load: Load | undefined;
  /** The load's run, until every create is acknowledged or refused for good. */
  loadDone: Promise<void> | undefined;
  readonly procs = new Map<string, { proc: SchedulerProc; stop: () => Promise<void> }>();

  killAt: number | null = null;
  gOld: number | null = null;
  gNew: number | null = null;
  promoteMs: number | null = null;
  takeoverMs: number | null = null;
  takeover: DrillReport["takeover"] = null;
  oldRegionFrom: number | null = null;

  constructor(readonly o: FailoverDrillOptions) {
    this.t = { ...DEFAULT_TIMINGS, ...o.timings };
    this.cleanup = o.cleanup ?? new Cleanup();
    this.say = o.progress ?? (() => {});
    this.env = o.env ?? process.env;
  }

  progress(text: string): void {
    if (this.cleanup.interrupted) return;
    this.say(`drill +${((Date.now() - this.t0) / 1000).toFixed(1)}s: ${text}`);
  }

  get ranSchedulers(): boolean {
    return "schedulers" in this.phases;
  }

  /** Ends the phase under way: its time goes into the report under `name`. */
  phase(name: string): void {
    const now = Date.now();
    this.phases[name] = now - this.phaseStart;
    this.phaseStart = now;
  }

  /** Kept when the drill did not pass (and was not interrupted), else removed. */
  removeLogs(): void {
    if (this.keepLogs && !this.cleanup.interrupted) this.keptLogsAt = this.logs;
    else rmSync(this.logs, { recursive: true, force: true });
  }

  async spawn(name: string, args: string[], databaseUrl: string): Promise<SchedulerProc> {
    const port = await freePort();
    const env: Record<string, string> = { ...SCHEDULER_ENV, DATABASE_URL: databaseUrl, PORT: String(port) };
    for (const k of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) if (this.env[k]) env[k] = this.env[k]!;
    const proc = new SchedulerProc({ name, command: this.o.schedulerCommand, args, env, port, logFile: join(this.logs, `scheduler-${name}.log`) });
    const stop = this.cleanup.add(
      `scheduler ${name}`,
      () => proc.stop(),
      () => proc.kill("SIGKILL"),
    );
    this.procs.set(name, { proc, stop });
    return proc;
  }

  async stopProc(name: string): Promise<void> {
    const p = this.procs.get(name);
    if (!p) return;
    this.procs.delete(name);
    await p.stop();
  }
}
