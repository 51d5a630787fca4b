/**
 * The fault injector: a plan drawn from the seed (which fault, on what, when, for how long),
 * then its execution against the cluster. Faults may overlap in time; two faults on the same
 * thing (one process, PostgreSQL, Redis, the region authority) wait for each other. Every
 * fault undoes itself when it ends (SIGCONT, restart, unpause, fail back), so the round ends
 * with everything up.
 */
import type { ChaosCluster } from "./cluster.ts";
import { TIMINGS } from "./cluster.ts";
import type { Mode } from "./processes.ts";
import type { Prng } from "./prng.ts";
import { seams } from "./seams.ts";
import { SWITCHED_FAULTS } from "./switched-faults.ts";

export const FAULT_KINDS = [
  "sigkill-api",
  "sigkill-dispatcher",
  "sigkill-worker",
  "sigstop-api",
  "sigstop-dispatcher",
  "sigstop-worker",
  "pg-restart-fast",
  "pg-restart-immediate",
  "pg-kill-backends",
  "redis-flushall",
  "redis-restart",
  "redis-pause",
  "failover-aba",
  "failover-aba-restart",
  "clock-skew",
  "clock-skew-api",
  "sql-errors-generation",
  "sql-errors-completion",
  "renewals-fail",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  /** ms after the load started */
  at: number;
  kind: FaultKind;
  /** Process names it acts on (none for PostgreSQL, Redis, the authority). */
  procs: string[];
  /** How long the thing stays down / stopped / paused / moved / skewed. */
  holdMs: number;
  /** clock-skew: the offset given to the process. */
  offsetMs?: number;
}

export interface FaultRecord extends PlannedFault {
  startedAt: number | null;
  endedAt: number | null;
  /** Why it was not injected (a seam this branch does not have yet). */
  skipped: string | null;
  error: string | null;
  detail: string;
}

/**
 * What each statement-error fault injects (seam 2: SCHEDULER_TEST_FAULTS), per process. The
 * generation's and renewals-fail's are switched on and off in running processes
 * (switched-faults.ts); the completion's by a restart with them.
 */
export const STATEMENT_FAULTS = {
  "sql-errors-generation": SWITCHED_FAULTS.dispatcher!,
  "sql-errors-completion": "CompleteAttempts=40P01@0.3,AcceptAsync=55P03@0.3",
  "renewals-fail": SWITCHED_FAULTS.worker!,
} as const;

const PROCS_BY_MODE: Record<Exclude<Mode, "all">, string[]> = {
  api: ["a-api"],
  dispatcher: ["a-dispatcher-1", "a-dispatcher-2"],
  worker: ["a-worker-1", "a-worker-2"],
};

/** Past the worker lease and the skew margin, so the lease lapses and is taken over while stopped. */
const stopHold = (p: Prng) => TIMINGS.leaseTtlMs + TIMINGS.clockSkewMs + p.int(1000, 2500);

function draw(p: Prng, kind: FaultKind, at: number): PlannedFault {
  const mode = /^sig(kill|stop)-(api|dispatcher|worker)$/.exec(kind)?.[2] as Exclude<Mode, "all"> | undefined;
  if (mode) return { at, kind, procs: [p.pick(PROCS_BY_MODE[mode])], holdMs: kind.startsWith("sigkill") ? p.int(300, 2000) : stopHold(p) };
  switch (kind) {
    case "pg-restart-fast":
    case "pg-restart-immediate":
    case "redis-restart":
      return { at, kind, procs: [], holdMs: p.int(500, 2500) };
    case "pg-kill-backends":
    case "redis-flushall":
      return { at, kind, procs: [], holdMs: 500 };
    case "redis-pause":
      return { at, kind, procs: [], holdMs: p.int(2000, 4000) };
    case "failover-aba":
      return { at, kind, procs: [], holdMs: p.int(3000, 6000) };
    case "failover-aba-restart":
      // After A → B → A, one of a's dispatchers restarts: it takes a fresh term while its
      // peer kept the one from before the failover (fencing tokens must still not go down).
      return { at, kind, procs: [p.pick(PROCS_BY_MODE.dispatcher)], holdMs: p.int(3000, 6000) };
    case "clock-skew-api":
      // The API's clock behind the database's: a `delay` computed from it would make a job due early.
      return { at, kind, procs: PROCS_BY_MODE.api, holdMs: p.int(6000, 10_000), offsetMs: -p.int(2000, 5000) };
    case "renewals-fail":
      // Past the lease and the skew margin, so the reaper takes the calls in flight over.
      return { at, kind, procs: [p.pick(PROCS_BY_MODE.worker)], holdMs: TIMINGS.leaseTtlMs + TIMINGS.clockSkewMs + p.int(1000, 3000) };
    case "clock-skew":
      return {
        at,
        kind,
        procs: [p.pick([...PROCS_BY_MODE.api, ...PROCS_BY_MODE.dispatcher, ...PROCS_BY_MODE.worker])],
        holdMs: p.int(6000, 10_000),
        offsetMs: (p.next() < 0.5 ? -1 : 1) * p.int(2000, 5000),
      };
    case "sql-errors-generation":
      return { at, kind, procs: PROCS_BY_MODE.dispatcher, holdMs: p.int(6000, 10_000) };
    case "sql-errors-completion":
      return { at, kind, procs: PROCS_BY_MODE.worker, holdMs: p.int(6000, 10_000) };
    default:
      throw new Error(`no plan for ${kind}`);
  }
}

/**
 * Short form: `each` faults of every kind, at instants spread over [fromMs, toMs] in a seeded
 * order. Generation errors come first, alone: lateness inside another fault's window is
 * excused, so overlapped they could never show that a transient error lost occurrences.
 */
export function planEach(p: Prng, each: number, fromMs: number, toMs: number): PlannedFault[] {
  const quiet = Array.from({ length: each }, (_, i) => draw(p, "sql-errors-generation", fromMs + i * 12_000));
  const start = fromMs + quiet.reduce((end, f) => Math.max(end, f.at - fromMs + f.holdMs), 0) + QUIET_AFTER_MS;
  const kinds = p.shuffle(FAULT_KINDS.filter((k) => k !== "sql-errors-generation").flatMap((k) => Array.from({ length: each }, () => k)));
  const slot = Math.max(0, toMs - start) / kinds.length;
  return [...quiet, ...kinds.map((k, i) => draw(p, k, Math.round(start + (i + p.next() * 0.8) * slot)))];
}

/** After the quiet generation-error window: its lateness is judged before the next fault starts. */
const QUIET_AFTER_MS = 4000;

/** Long form: a fault of a random kind every [gapMin, gapMax] ms over [fromMs, toMs]. */
export function planRandom(p: Prng, fromMs: number, toMs: number, gapMin = 2000, gapMax = 6000): PlannedFault[] {
  const out: PlannedFault[] = [];
  for (let at = fromMs + p.int(0, gapMax); at < toMs; at += p.int(gapMin, gapMax)) out.push(draw(p, p.pick(FAULT_KINDS), at));
  return out;
}

export function describe(f: PlannedFault): string {
  const on = f.procs.length ? ` ${f.procs.join("+")}` : "";
  const off = f.offsetMs !== undefined ? ` offset ${f.offsetMs > 0 ? "+" : ""}${f.offsetMs}ms` : "";
  return `+${(f.at / 1000).toFixed(1)}s ${f.kind}${on} for ${f.holdMs}ms${off}`;
}

class Locks {
  private tails = new Map<string, Promise<void>>();

  /** Runs fn holding every named lock (taken in name order, so two faults never deadlock). */
  async with<T>(names: string[], fn: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(names)].sort();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const before = sorted.map((n) => this.tails.get(n) ?? Promise.resolve());
    for (const n of sorted) this.tails.set(n, mine);
    await Promise.all(before);
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

export class FaultInjector {
  readonly records: FaultRecord[];
  private locks = new Locks();
  private running: Promise<void>[] = [];
  private stopped = false;
  private readonly have = seams();

  constructor(
    private readonly cluster: ChaosCluster,
    plan: PlannedFault[],
    private readonly say: (line: string) => void,
  ) {
    this.records = plan.map((f) => ({ ...f, startedAt: null, endedAt: null, skipped: null, error: null, detail: "" }));
  }

  /** Starts each fault at its instant after `t0`; resolves once all have started and ended. */
  async run(t0: number): Promise<void> {
    for (const r of this.records) {
      const wait = t0 + r.at - Date.now();
      if (wait > 0) await Bun.sleep(wait);
      if (this.stopped) break;
      this.running.push(this.one(r, t0));
    }
    await Promise.all(this.running);
  }

  /** No new faults; the ones under way finish (and undo themselves). */
  stop(): void {
    this.stopped = true;
  }

  private resources(r: PlannedFault): string[] {
    if (r.kind.startsWith("pg-")) return ["pg"];
    if (r.kind.startsWith("redis-")) return ["redis"];
    if (r.kind === "failover-aba") return ["authority"];
    if (r.kind === "failover-aba-restart") return ["authority", ...r.procs];
    return r.procs;
  }

  private async one(r: FaultRecord, t0: number): Promise<void> {
    if (r.kind === "renewals-fail" && !this.have.faultSwitch) {
      r.skipped = "the fault switch (SCHEDULER_TEST_FAULTS_ARMED) is not in src/config.ts yet";
      return;
    }
    if (r.kind.startsWith("clock-skew") && !this.have.clockOffset) {
      r.skipped = "seam 1 (SCHEDULER_TEST_CLOCK_OFFSET_MS) is not in src/config.ts yet";
      return;
    }
    if (r.kind.startsWith("sql-errors") && !this.have.statementFaults) {
      r.skipped = "seam 2 (SCHEDULER_TEST_FAULTS) is not in src/config.ts yet";
      return;
    }
    await this.locks.with(this.resources(r), async () => {
      r.startedAt = Date.now() - t0;
      this.say(`fault ${describe(r)} (started +${(r.startedAt / 1000).toFixed(1)}s)`);
      try {
        r.detail = await this.inject(r);
        this.say(`fault ${r.kind} ended: ${r.detail}`);
      } catch (err) {
        r.error = (err as Error).message;
        this.say(`fault ${r.kind} failed: ${r.error}`);
      }
      r.endedAt = Date.now() - t0;
    });
  }

  private async inject(r: FaultRecord): Promise<string> {
    const c = this.cluster;
    switch (r.kind) {
      case "sigkill-api":
      case "sigkill-dispatcher":
      case "sigkill-worker": {
        const p = c.proc(r.procs[0]!);
        await p.down("SIGKILL");
        await Bun.sleep(r.holdMs);
        await p.up();
        return `${p.name} killed, back after ${r.holdMs} ms`;
      }
      case "sigstop-api":
      case "sigstop-dispatcher":
      case "sigstop-worker": {
        const p = c.proc(r.procs[0]!);
        p.signal("SIGSTOP");
        await Bun.sleep(r.holdMs);
        p.signal("SIGCONT");
        return `${p.name} stopped ${r.holdMs} ms`;
      }
      case "pg-restart-fast":
      case "pg-restart-immediate":
        await c.restartPostgres(r.kind === "pg-restart-fast" ? "fast" : "immediate", r.holdMs);
        return `down ${r.holdMs} ms`;
      case "pg-kill-backends": {
        const n1 = await c.killBackends();
        await Bun.sleep(r.holdMs);
        const n2 = await c.killBackends();
        return `${n1} + ${n2} backends terminated`;
      }
      case "redis-flushall":
        await c.redis.command("FLUSHALL");
        return "flushed";
      case "redis-restart":
        await c.redis.kill();
        await Bun.sleep(r.holdMs);
        await c.redis.start();
        return `down ${r.holdMs} ms (no persistence: empty after)`;
      case "redis-pause":
        await c.redis.command("CLIENT", ["PAUSE", String(r.holdMs), "ALL"]);
        await Bun.sleep(r.holdMs);
        return `paused ${r.holdMs} ms`;
      case "failover-aba": {
        await moveAuthority(c, "b");
        await Bun.sleep(r.holdMs);
        await moveAuthority(c, "a");
        return `a → b, ${r.holdMs} ms, b → a`;
      }
      case "failover-aba-restart": {
        await moveAuthority(c, "b");
        await Bun.sleep(r.holdMs);
        await moveAuthority(c, "a");
        const p = c.proc(r.procs[0]!);
        await p.down("SIGKILL");
        await Bun.sleep(300);
        await p.up();
        return `a → b, ${r.holdMs} ms, b → a, then ${p.name} killed and started again`;
      }
      case "clock-skew":
      case "clock-skew-api":
        return this.withEnv(r.procs, { SCHEDULER_TEST_CLOCK_OFFSET_MS: String(r.offsetMs) }, r.holdMs);
      case "sql-errors-generation":
        if (this.have.faultSwitch) return this.switched(r.procs, r.holdMs);
        return this.withEnv(r.procs, { SCHEDULER_TEST_FAULTS: STATEMENT_FAULTS[r.kind] }, r.holdMs);
      case "renewals-fail":
        return this.switched(r.procs, r.holdMs);
      case "sql-errors-completion":
        return this.withEnv(r.procs, { SCHEDULER_TEST_FAULTS: STATEMENT_FAULTS[r.kind], SCHEDULER_TEST_FAULTS_ARMED: "1" }, r.holdMs);
    }
  }

  /** Arms the processes' switched faults (SIGUSR2, no restart) for holdMs, then disarms them. */
  private async switched(names: string[], holdMs: number): Promise<string> {
    const procs = names.map((n) => this.cluster.proc(n));
    const armed = procs.filter((p) => p.setFaults(true)).map((p) => p.name);
    await Bun.sleep(holdMs);
    for (const p of procs) p.setFaults(false);
    return `${armed.join("+") || "none (not running)"} with ${SWITCHED_FAULTS[procs[0]!.spec.mode]} armed for ${holdMs} ms (SIGUSR2, no restart)`;
  }

  /** Restarts the processes (gracefully) with `env`, keeps them so for holdMs, then restarts them without. */
  private async withEnv(names: string[], env: Record<string, string>, holdMs: number): Promise<string> {
    const procs = names.map((n) => this.cluster.proc(n));
    for (const p of procs) {
      p.overrides = env;
      await p.down("SIGTERM");
      await p.up();
    }
    await Bun.sleep(holdMs);
    for (const p of procs) {
      p.overrides = {};
      await p.down("SIGTERM");
      await p.up();
    }
    return `${names.join("+")} with ${Object.entries(env)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")} for ${holdMs} ms`;
  }
}

/**
 * POST /v1/cluster/failover {to} through whichever API answers, until the authority is in
 * `to` (retried through outages of the other faults, for up to 60 s).
 */
export async function moveAuthority(c: ChaosCluster, to: "a" | "b"): Promise<void> {
  const end = Date.now() + 60_000;
  let last = "";
  while (Date.now() < end) {
    for (const base of [c.proc(to === "b" ? "b-all" : "a-api").url, c.proc(to === "b" ? "a-api" : "b-all").url]) {
      try {
        const view = await fetch(`${base}/v1/cluster`, { signal: AbortSignal.timeout(2000) });
        if (view.status === 200 && ((await view.json()) as { home_region?: string }).home_region === to) return;
        const res = await fetch(`${base}/v1/cluster/failover`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ to, reason: "chaos: failover a → b → a", force: true }),
          signal: AbortSignal.timeout(5000),
        });
        if (res.status === 200) return;
        last = `${res.status} ${(await res.text()).slice(0, 200)}`;
      } catch (err) {
        last = (err as Error).message;
      }
    }
    await Bun.sleep(300);
  }
  throw new Error(`could not move the region authority to ${to} in 60 s (last: ${last})`);
}
