import { createWriteStream, type WriteStream } from "node:fs";
import type { Subprocess } from "bun";
import { DrillError } from "./errors.ts";

export type LogLine = Record<string, unknown> & { msg?: string };

export interface SchedulerProcOptions {
  /** "a-all", "a-worker", "b-all", "a-all-again": names it in messages and its log file. */
  name: string;
  /** How to start a scheduler, e.g. [bun, "src/main.ts"] or [the compiled binary]. */
  command: string[];
  args: string[];
  env: Record<string, string>;
  port: number;
  /** stdout and stderr, as they come. */
  logFile: string;
}

const TAIL = 40;

/** One scheduler process: JSON log lines parsed as they come, the raw output teed to a file. */
export class SchedulerProc {
  readonly proc: Subprocess<"ignore", "pipe", "pipe">;
  readonly lines: LogLine[] = [];
  private tail: string[] = [];
  private file: WriteStream;
  private waiters = new Set<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  exitCode: number | null = null;
  readonly exited: Promise<number>;
  readonly startedAt = Date.now();
  private pumps: Promise<void>[];

  constructor(readonly o: SchedulerProcOptions) {
    this.file = createWriteStream(o.logFile, { flags: "a" });
    this.proc = Bun.spawn([...o.command, ...o.args], { env: o.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    this.exited = this.proc.exited.then((code) => (this.exitCode = code));
    this.pumps = [this.pump(this.proc.stdout, true), this.pump(this.proc.stderr, false)];
  }

  get name(): string {
    return this.o.name;
  }

  get url(): string {
    return `http://127.0.0.1:${this.o.port}`;
  }

  get pid(): number {
    return this.proc.pid;
  }

  private async pump(stream: ReadableStream<Uint8Array>, json: boolean): Promise<void> {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of stream) {
      this.file.write(chunk);
      buf += dec.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        this.line(buf.slice(0, i), json);
        buf = buf.slice(i + 1);
      }
    }
    if (buf) this.line(buf, json);
  }

  private line(text: string, json: boolean): void {
    this.tail.push(text);
    if (this.tail.length > TAIL) this.tail.shift();
    if (!json) return;
    let l: LogLine;
    try {
      l = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof l !== "object" || l === null) return;
    this.lines.push(l);
    for (const w of this.waiters)
      if (w.pred(l)) {
        this.waiters.delete(w);
        w.resolve(l);
      }
  }

  /** The last lines of output, for an error message. */
  lastOutput(n = 5): string {
    return this.tail
      .slice(-n)
      .map((l) => l.slice(0, 400))
      .join("\n");
  }

  find(pred: (l: LogLine) => boolean): LogLine | undefined {
    return this.lines.find(pred);
  }

  /**
   * The first log line matching `pred` (already printed or to come). Rejects with the end of
   * the output and the log file's name if the process exits first or `ms` pass.
   */
  waitForLog(pred: (l: LogLine) => boolean, ms: number, what: string): Promise<LogLine> {
    const seen = this.lines.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (l: LogLine) => {
          clearTimeout(t);
          resolve(l);
        },
      };
      const fail = (why: string) => {
        this.waiters.delete(w);
        clearTimeout(t);
        reject(new DrillError(`scheduler ${this.name}: ${why} waiting for ${what}; log: ${this.o.logFile}\n${indent(this.lastOutput())}`));
      };
      const t = setTimeout(() => fail(`nothing after ${ms} ms`), ms);
      this.waiters.add(w);
      this.exited.then(async (code) => {
        await Promise.race([Promise.all(this.pumps), Bun.sleep(200)]);
        if (this.waiters.has(w)) fail(`exited with code ${code}`);
      });
    });
  }

  kill(sig: NodeJS.Signals = "SIGKILL"): void {
    try {
      this.proc.kill(sig);
    } catch {
      // already gone
    }
  }

  /** SIGKILL, then waits for the exit and the last output to land in the log file. */
  async stop(): Promise<void> {
    this.kill("SIGKILL");
    await this.exited;
    await Promise.race([Promise.all(this.pumps), Bun.sleep(500)]);
    await new Promise<void>((r) => this.file.end(() => r()));
  }
}

export function indent(text: string): string {
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => `    ${l}`)
    .join("\n");
}
