/**
 * The chaos cluster's scheduler processes: real `bun src/main.ts --mode=…` processes, each
 * with a fixed port (so a restart comes back where clients expect it) and a supervisor that
 * starts again any process that dies when no fault asked for it (counted: an unexpected exit
 * is a finding, though not one of the invariants).
 */
import { join } from "node:path";
import { SchedulerProc, type LogLine } from "../../src/region/drill/scheduler-proc.ts";
import { freePort } from "../../src/region/drill/ports.ts";

const ROOT = join(import.meta.dir, "..", "..");
const STARTED = (l: LogLine) => l.msg === "scheduler started";

export type Mode = "api" | "dispatcher" | "worker" | "all";

export interface ProcSpec {
  name: string;
  mode: Mode;
  region: "a" | "b";
}

/** Region a is home: an api, two dispatchers, two workers. Region b: one process of every part, the failover's other side. */
export const PROCESSES: ProcSpec[] = [
  { name: "a-api", mode: "api", region: "a" },
  { name: "a-dispatcher-1", mode: "dispatcher", region: "a" },
  { name: "a-dispatcher-2", mode: "dispatcher", region: "a" },
  { name: "a-worker-1", mode: "worker", region: "a" },
  { name: "a-worker-2", mode: "worker", region: "a" },
  { name: "b-all", mode: "all", region: "b" },
];

export interface UnexpectedExit {
  name: string;
  code: number | null;
  at: number;
  lastOutput: string;
}

export class ManagedProc {
  proc: SchedulerProc | undefined;
  port = 0;
  /** Extra environment for the next starts (a clock offset, injected statement errors). */
  overrides: Record<string, string> = {};
  /** False while a fault keeps it down on purpose: the supervisor leaves it alone. */
  wanted = true;
  private starting: Promise<void> | undefined;
  stopped = false;
  /** Whether its switched faults (switched-faults.ts) are armed: each start begins disarmed unless overridden. */
  faultsArmed = false;

  constructor(
    readonly spec: ProcSpec,
    private readonly env: () => Record<string, string>,
    private readonly logDir: string,
    private readonly onUnexpected: (e: UnexpectedExit) => void,
  ) {}

  get name(): string {
    return this.spec.name;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null;
  }

  /** Starts the process (again) and waits for "scheduler started"; retried while it fails (PostgreSQL down, say). */
  start(timeoutMs = 60_000): Promise<void> {
    this.starting ??= this.startLoop(timeoutMs).finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async startLoop(timeoutMs: number): Promise<void> {
    if (!this.port) this.port = await freePort();
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (this.stopped) return;
      const p = new SchedulerProc({
        name: this.name,
        command: [process.execPath, join(ROOT, "src/main.ts")],
        args: [`--mode=${this.spec.mode}`, `--region=${this.spec.region}`],
        env: { ...this.env(), ...this.overrides, PORT: String(this.port) },
        port: this.port,
        logFile: join(this.logDir, `${this.name}.log`),
      });
      this.proc = p;
      this.faultsArmed = this.overrides.SCHEDULER_TEST_FAULTS_ARMED === "1";
      try {
        await p.waitForLog(STARTED, Math.max(1000, end - Date.now()), '"scheduler started"');
        p.exited.then((code) => {
          if (this.proc === p && this.wanted && !this.stopped) {
            this.onUnexpected({ name: this.name, code, at: Date.now(), lastOutput: p.lastOutput(3) });
            void Bun.sleep(300).then(() => {
              if (this.proc === p && this.wanted) void this.start().catch(() => {});
            });
          }
        });
        return;
      } catch (err) {
        await p.stop();
        if (Date.now() > end || this.stopped) throw err;
        await Bun.sleep(300);
      }
    }
  }

  /** Arms or disarms its switched faults (SIGUSR2 toggles them); false if not running. */
  setFaults(on: boolean): boolean {
    if (!this.running) return false;
    if (this.faultsArmed !== on) {
      this.signal("SIGUSR2");
      this.faultsArmed = on;
    }
    return true;
  }

  signal(sig: NodeJS.Signals): void {
    this.proc?.kill(sig);
  }

  /** SIGKILL (or SIGTERM for a graceful stop) and wait for the exit; the supervisor does not restart it. */
  async down(sig: "SIGKILL" | "SIGTERM" = "SIGKILL"): Promise<void> {
    this.wanted = false;
    await this.starting?.catch(() => {});
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    p.kill("SIGCONT");
    p.kill(sig);
    const exited = await Promise.race([p.exited.then(() => true), Bun.sleep(15_000).then(() => false)]);
    if (!exited) await p.stop();
  }

  async up(): Promise<void> {
    this.wanted = true;
    if (!this.running) await this.start();
  }

  /** Gone for good (end of the round). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wanted = false;
    const p = this.proc;
    if (p) {
      p.kill("SIGCONT");
      await p.stop();
    }
  }
}
