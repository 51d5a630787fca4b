import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";

const ROOT = join(import.meta.dir, "..", "..");

export interface SchedulerOptions {
  /** Unset: the embedded PGlite in dataDir. */
  databaseUrl?: string;
  dataDir?: string;
  concurrency: number;
  logLevel: string;
  logFile: string;
  /** More variables for the scheduler, after (over) those passed through, e.g. SCHEDULER_DISPATCH_RATE. */
  env?: Record<string, string>;
  /** --mode; default all. */
  mode?: "all" | "api" | "dispatcher" | "worker";
}

async function freePort(): Promise<number> {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = s.port!;
  s.stop(true);
  return port;
}

/** SCHEDULER_* variables of our own environment, passed on so a run can tune the scheduler. */
/** The RAM size the scheduler's launchers tell the JS engine's GC to plan for (package.json "start", Dockerfile, fly.toml). */
export const JSC_RAM_SIZE = "1073741824";

/**
 * SCHEDULER_BENCH_ENV="K=V K2=V2": variables for the scheduler's process only (a JS engine
 * option such as BUN_JSC_useFTLJIT=0 set in the bench's own environment would change the
 * bench, its target and the peers too).
 */
export function benchEnv(raw = process.env.SCHEDULER_BENCH_ENV): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of raw?.split(/\s+/).filter(Boolean) ?? []) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new Error(`SCHEDULER_BENCH_ENV: "${pair}" is not NAME=VALUE`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

export function passedThrough(env: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    // The allocators' and the JS engine's own variables (MIMALLOC_PURGE_DELAY, BUN_JSC_…): to measure a setting.
    if (k.startsWith("MIMALLOC_") || k.startsWith("BUN_JSC_")) out[k] = v ?? "";
    else if (
      k.startsWith("SCHEDULER_") &&
      !k.startsWith("SCHEDULER_BENCH_") &&
      k !== "SCHEDULER_ALLOW_PRIVATE_TARGETS" &&
      k !== "SCHEDULER_DATA_DIR" &&
      v !== undefined
    )
      out[k] = v;
  }
  return out;
}

/** `bun src/main.ts --mode=all` (or another mode) in its own process, its output appended to logFile. */
export class SchedulerProcess {
  readonly proc: Subprocess;
  readonly url: string;
  private exitCode: number | undefined;

  private constructor(
    proc: Subprocess,
    port: number,
    private readonly logFile: string,
  ) {
    this.proc = proc;
    this.url = `http://127.0.0.1:${port}`;
    proc.exited.then((code) => (this.exitCode = code));
  }

  static async start(o: SchedulerOptions): Promise<SchedulerProcess> {
    const port = await freePort();
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      // As `npm start`, the Dockerfile and fly.toml run it (README "Memory"); set it to measure another value.
      BUN_JSC_forceRAMSize: process.env.BUN_JSC_forceRAMSize ?? JSC_RAM_SIZE,
      ...passedThrough(),
      ...benchEnv(),
      ...o.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: o.logLevel,
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
      WORKER_CONCURRENCY: String(o.concurrency),
    };
    if (o.databaseUrl) env.DATABASE_URL = o.databaseUrl;
    if (o.dataDir) env.SCHEDULER_DATA_DIR = o.dataDir;
    const fd = openSync(o.logFile, "a");
    try {
      // SCHEDULER_BENCH_BUN_ARGS: flags for bun itself, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof".
      const bunArgs = process.env.SCHEDULER_BENCH_BUN_ARGS?.split(/\s+/).filter(Boolean) ?? [];
      const proc = Bun.spawn([process.execPath, ...bunArgs, join(ROOT, "src/main.ts"), `--mode=${o.mode ?? "all"}`], {
        cwd: ROOT,
        env,
        stdin: "ignore",
        stdout: fd,
        stderr: fd,
      });
      return new SchedulerProcess(proc, port, o.logFile);
    } finally {
      closeSync(fd); // the child has its own copy
    }
  }

  get exited(): boolean {
    return this.exitCode !== undefined;
  }

  /** Throws if the process has died: a benchmark against a dead scheduler measures nothing. */
  assertAlive(): void {
    if (this.exitCode !== undefined) throw new Error(`the scheduler exited with code ${this.exitCode}`);
  }

  async waitReady(ms = 30_000): Promise<void> {
    const end = Date.now() + ms;
    let last = "";
    while (Date.now() < end) {
      this.assertAlive();
      try {
        const res = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) });
        if (res.ok) return;
        last = `HTTP ${res.status} ${await res.text()}`;
      } catch (err) {
        last = (err as Error).message;
      }
      await Bun.sleep(100);
    }
    throw new Error(`the scheduler was not ready within ${ms} ms (last answer: ${last})`);
  }

  /** SIGTERM, then wait for the graceful stop; SIGKILL if it takes longer than ms. */
  async stop(ms = 40_000): Promise<number> {
    if (this.exitCode !== undefined) return this.exitCode;
    this.proc.kill("SIGTERM");
    const timer = Bun.sleep(ms).then(() => "timeout" as const);
    if ((await Promise.race([this.proc.exited, timer])) === "timeout") {
      this.proc.kill("SIGKILL");
      await this.proc.exited;
      throw new Error(`the scheduler did not stop within ${ms} ms of SIGTERM; killed it`);
    }
    return this.proc.exited;
  }

  kill(): void {
    if (this.exitCode !== undefined) return;
    try {
      this.proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  }

  logTail(lines = 30): string {
    try {
      return readFileSync(this.logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no output)";
    }
  }

  /** CPU seconds (user + system) the process has used so far, from /proc; undefined elsewhere. */
  cpuSeconds(): number | undefined {
    return procCpuSeconds(this.proc.pid);
  }

  /** The most resident memory the process has had so far (VmHWM), in bytes; undefined without /proc. */
  peakRssBytes(): number | undefined {
    return procMemoryBytes(this.proc.pid, "VmHWM");
  }
}

export const CLK_TCK = 100; // USER_HZ on every Linux we run on

/** utime + stime, seconds, of a /proc/PID/stat or /proc/PID/task/TID/stat text. */
export function statCpuSeconds(stat: string): number {
  // Fields after the ")" that closes the command name: state is field 3, utime 14, stime 15.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
}

export function procCpuSeconds(pid: number): number | undefined {
  try {
    return statCpuSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
}

/**
 * A memory figure of a live process from /proc/PID/status, in bytes: VmHWM is its peak
 * resident set so far (the kernel keeps it; nothing is missed between samples), VmRSS its
 * resident set now. Undefined without /proc or once the process is gone.
 */
export function procMemoryBytes(pid: number, field: "VmHWM" | "VmRSS"): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
