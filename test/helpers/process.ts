import { join } from "node:path";
import type { Subprocess } from "bun";

const ROOT = join(import.meta.dir, "..", "..");
const BUN = process.execPath;

export interface Proc {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  port: number;
  url: string;
  /** Lines of JSON log printed so far. */
  logs: () => Record<string, any>[];
  stderr: () => string;
  waitForLog: (pred: (l: Record<string, any>) => boolean, ms?: number) => Promise<Record<string, any>>;
  exited: Promise<number>;
}

export async function freePort(): Promise<number> {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const p = s.port!;
  s.stop(true);
  return p;
}

/** Starts `bun src/main.ts ARGS` as a real process with its own environment. */
export async function spawnScheduler(args: string[], env: Record<string, string>, opts: { cwd?: string; waitReady?: boolean } = {}): Promise<Proc> {
  const port = Number(env.PORT ?? (await freePort()));
  const proc = Bun.spawn([BUN, join(ROOT, "src/main.ts"), ...args], {
    cwd: opts.cwd ?? ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
      // Tests fire per-second schedules (the production default minimum is 10 s).
      SCHEDULER_MIN_SCHEDULE_INTERVAL: "1s",
      SCHEDULER_POLL_INTERVAL: "200ms",
      SCHEDULER_CLOCK_SKEW: "0",
      ...env,
      PORT: String(port),
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: Record<string, any>[] = [];
  let err = "";
  const waiters: { pred: (l: Record<string, any>) => boolean; resolve: (l: Record<string, any>) => void }[] = [];
  (async () => {
    let buf = "";
    for await (const chunk of proc.stdout) {
      buf += new TextDecoder().decode(chunk);
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const l = JSON.parse(line);
          lines.push(l);
          for (const w of [...waiters])
            if (w.pred(l)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(l);
            }
        } catch {
          // not a log line
        }
      }
    }
  })();
  (async () => {
    for await (const chunk of proc.stderr) err += new TextDecoder().decode(chunk);
  })();
  const p: Proc = {
    proc,
    port,
    url: `http://127.0.0.1:${port}`,
    logs: () => lines,
    stderr: () => err,
    exited: proc.exited,
    waitForLog: (pred, ms = 15_000) => {
      const found = lines.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`log line not seen in ${ms} ms; stderr: ${err.slice(-500)}`)), ms);
        waiters.push({
          pred,
          resolve: (l) => {
            clearTimeout(t);
            resolve(l);
          },
        });
      });
    },
  };
  if (opts.waitReady !== false) await p.waitForLog((l) => l.msg === "scheduler started", 20_000);
  return p;
}

export function kill(p: Proc | undefined, sig: NodeJS.Signals = "SIGKILL"): void {
  try {
    p?.proc.kill(sig);
  } catch {
    // already gone
  }
}
