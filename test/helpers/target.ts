/** A real webhook target on loopback that records every call and answers as a test says. */
export interface Received {
  at: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export type Responder = (r: Received, n: number) => Response | Promise<Response>;

export class Target {
  readonly calls: Received[] = [];
  private server: ReturnType<typeof Bun.serve>;
  private waiters: { n: number; resolve: () => void }[] = [];

  constructor(private responder: Responder = () => new Response("ok")) {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: async (req) => {
        const url = new URL(req.url);
        const r: Received = { at: Date.now(), method: req.method, path: url.pathname, headers: Object.fromEntries(req.headers), body: await req.text() };
        this.calls.push(r);
        const n = this.calls.filter((c) => c.path === r.path).length;
        for (const w of [...this.waiters]) if (this.calls.length >= w.n) w.resolve();
        return this.responder(r, n);
      },
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  respond(fn: Responder): void {
    this.responder = fn;
  }

  callsTo(path: string): Received[] {
    return this.calls.filter((c) => c.path === path);
  }

  /** Resolves when at least n calls have arrived in all; rejects after ms. */
  waitForCalls(n: number, ms = 10_000): Promise<void> {
    if (this.calls.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = {
        n,
        resolve: () => {
          clearTimeout(t);
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve();
        },
      };
      const t = setTimeout(() => reject(new Error(`expected ${n} calls, got ${this.calls.length} in ${ms} ms`)), ms);
      this.waiters.push(w);
    });
  }

  stop(): void {
    this.server.stop(true);
  }
}

/** Polls fn until it returns a truthy value; rejects after ms with the last value. */
export async function eventually<T>(fn: () => Promise<T> | T, ms = 10_000, what = "condition"): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last as NonNullable<T>;
    await Bun.sleep(20);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
}
