import { join } from "node:path";
import type { Subprocess } from "bun";

const ROOT = join(import.meta.dir, "..", "..");

/**
 * A receiver process kept up on one port: when it dies (SIGKILL on purpose), a new one is
 * started on the same port, as a supervisor would; the scheduler's retries find it there.
 */
export class SupervisedReceiver {
  private proc: Subprocess<"ignore", "pipe", "pipe"> | undefined;
  private stopping = false;
  starts = 0;
  private up: Promise<void> = Promise.resolve();
  stderr = "";

  constructor(
    private readonly script: string,
    readonly port: number,
    private readonly env: Record<string, string>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts it and resolves once it serves. */
  start(): Promise<void> {
    this.up = this.spawn();
    return this.up;
  }

  /** Resolves when the current process (after any restart) serves. */
  ready(): Promise<void> {
    return this.up;
  }

  private async spawn(): Promise<void> {
    this.starts++;
    const p = Bun.spawn([process.execPath, join(ROOT, this.script)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...this.env, PORT: String(this.port) },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    this.proc = p;
    (async () => {
      for await (const c of p.stderr) this.stderr += new TextDecoder().decode(c);
    })();
    let started!: () => void;
    const serving = new Promise<void>((r) => (started = r));
    (async () => {
      let buf = "";
      for await (const c of p.stdout) {
        buf += new TextDecoder().decode(c);
        if (buf.includes('"receiver started"')) started();
      }
    })();
    p.exited.then(() => {
      if (this.stopping || this.proc !== p) return;
      this.up = this.spawn();
    });
    await Promise.race([
      serving,
      Bun.sleep(20_000).then(() => {
        throw new Error(`receiver did not start: ${this.stderr.slice(-500)}`);
      }),
    ]);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const p = this.proc;
    if (!p) return;
    try {
      p.kill("SIGKILL");
    } catch {
      // already gone
    }
    await p.exited;
  }
}
