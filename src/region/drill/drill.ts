import { rmSync } from "node:fs";
import { join } from "node:path";
import { analyze } from "./analyze.ts";
import { Cleanup } from "./cleanup.ts";
import { DrillError } from "./errors.ts";
import { getCluster, Load } from "./load.ts";
import { machineInfo } from "./machine.ts";
import { findPgBin } from "./pg-bin.ts";
import type { PgCluster } from "./pg-cluster.ts";
import { startReplicatedPostgres } from "./replicated-pg.ts";
import { explainFindings } from "./explain.ts";
import { PgUser } from "./pg-user.ts";
import { freePort } from "./ports.ts";
import type { DrillReport } from "./report.ts";
import { SchedulerProc, type LogLine } from "./scheduler-proc.ts";
import { DrillTarget, generationOf, type TargetCall } from "./target.ts";
import { withTimeout } from "../../time/with-timeout.ts";
import { DEFAULT_TIMINGS, type DrillTimings, type FailoverDrillOptions, SCHEDULER_ENV } from "./settings.ts";

const STARTED = (l: LogLine) => l.msg === "scheduler started";
const TOOK_OVER = (l: LogLine) => l.msg === "took over region authority";
const WAITING_FOR_PROMOTION = (l: LogLine) => typeof l.msg === "string" && l.msg.startsWith("database is read-only");
const SCHEDULE_PATH = "/s";

/**
 * A real local failover drill: PostgreSQL primary + streaming standby, region A (two
 * scheduler processes) on the primary, region B (one) on the standby, a recording target;
 * load, kill A, promote, B takes over by itself, drain, bring the old home back, report.
 * Resolves with the report whatever happened (a phase that failed is in `error`); every
 * process it started is gone and its temp dir removed when it resolves.
 */
export function runFailoverDrill(opts: FailoverDrillOptions): Promise<DrillReport> {
  return new FailoverDrill(opts).run();
}

class FailoverDrill {
  private readonly t: DrillTimings;
  private readonly cleanup: Cleanup;
  private readonly say: (line: string) => void;
  private readonly t0 = Date.now();
  private phaseStart = Date.now();
  private readonly phases: Record<string, number> = {};
  private readonly notes: string[] = [];
  private readonly env: Record<string, string | undefined>;

  private user!: PgUser;
  private bin = "";
  private pgVersion = "";
  private work = "";
  private logs = "";
  private keepLogs = false;
  private keptLogsAt: string | null = null;
  private primary!: PgCluster;
  private standby!: PgCluster;
  private target: DrillTarget | undefined;
  private load: Load | undefined;
  private procs = new Map<string, { proc: SchedulerProc; stop: () => Promise<void> }>();

  private killAt: number | null = null;
  private gOld: number | null = null;
  private gNew: number | null = null;
  private promoteMs: number | null = null;
  private takeoverMs: number | null = null;
  private takeover: DrillReport["takeover"] = null;
  private oldRegionFrom: number | null = null;

  constructor(private readonly o: FailoverDrillOptions) {
    this.t = { ...DEFAULT_TIMINGS, ...o.timings };
    this.cleanup = o.cleanup ?? new Cleanup();
    this.say = o.progress ?? (() => {});
    this.env = o.env ?? process.env;
  }

  private progress(text: string): void {
    if (this.cleanup.interrupted) return;
    this.say(`drill +${((Date.now() - this.t0) / 1000).toFixed(1)}s: ${text}`);
  }

  private get ranSchedulers(): boolean {
    return "schedulers" in this.phases;
  }

  private phase(name: string): void {
    const now = Date.now();
    this.phases[name] = now - this.phaseStart;
    this.phaseStart = now;
  }

  async run(): Promise<DrillReport> {
    const startedAt = new Date().toISOString();
    const onExit = () => this.cleanup.runSync();
    process.on("exit", onExit);
    let error: string | null = null;
    try {
      await this.setup();
      await this.startRegions();
      await this.loadAndKill();
      await this.failover();
      await this.drain();
      await this.oldHomeComesBack();
    } catch (err) {
      error = err instanceof DrillError ? err.message : ((err as Error)?.stack ?? String(err));
      // Before the schedulers run (no PostgreSQL, initdb failed…), drillMain prints the one line.
      if (this.ranSchedulers) this.progress(`failed: ${error.split("\n")[0]}`);
    }
    this.load?.stop();
    // Stop every scheduler before counting, so no call lands after the analysis.
    for (const { stop } of this.procs.values()) await stop().catch(() => {});
    const a = analyze({
      calls: this.target?.calls ?? [],
      jobs: this.load?.jobs ?? [],
      schedulePath: SCHEDULE_PATH,
      killAt: this.killAt,
      newGeneration: this.gNew,
      oldRegionFrom: this.oldRegionFrom,
    });
    const passed = a.passed && error === null;
    this.keepLogs = !passed && !this.cleanup.interrupted;
    const failures = await this.cleanup.run();
    this.phase("teardown");
    process.off("exit", onExit);
    for (const f of failures) this.notes.push(`cleanup: ${f}`);
    this.notes.push(...explainFindings(a, this.o.sync));
    const report: DrillReport = {
      drill: "failover",
      ...a,
      passed,
      sync: this.o.sync,
      jobs_requested: this.o.jobs,
      started_at: startedAt,
      finished_at: new Date().toISOString(),
      generation_before: this.gOld,
      generation_after: this.gNew,
      promote_ms: this.promoteMs,
      takeover_ms: this.takeoverMs,
      takeover: this.takeover,
      create_requests: this.load?.requests ?? 0,
      create_retries: Object.fromEntries(this.load?.retries ?? []),
      phases_ms: this.phases,
      postgres: { version: this.pgVersion, bin: this.bin },
      machine: machineInfo(),
      notes: this.notes,
      error,
      logs_dir: this.keptLogsAt,
    };
    if (this.ranSchedulers)
      this.progress(
        `${passed ? "PASSED" : "FAILED"}: lost ${a.lost}, duplicates ${a.duplicates_accepted}, early ${a.early}, old home accepted ${a.old_region_accepted}, misfire ${a.misfire_ok ? "ok" : "NOT ok"}, rto ${a.rto_ms ?? "—"} ms`,
      );
    return report;
  }

  // ── 1–2. PostgreSQL primary and streaming standby ───────────────────────────────────

  private async setup(): Promise<void> {
    this.bin = findPgBin(this.o.pgBin, this.env);
    this.user = await PgUser.detect();
    // Logs in a dir of their own, so the paths named in messages stay valid when it is kept.
    this.logs = await this.user.makeTempDir("scheduler-drill-logs-");
    this.cleanup.add(
      "logs dir",
      () => this.removeLogs(),
      () => rmSync(this.logs, { recursive: true, force: true }),
    );
    this.work = await this.user.makeTempDir("scheduler-drill-");
    this.cleanup.add(
      "temp dir",
      () => rmSync(this.work, { recursive: true, force: true }),
      () => rmSync(this.work, { recursive: true, force: true }),
    );
    ({
      primary: this.primary,
      standby: this.standby,
      version: this.pgVersion,
    } = await startReplicatedPostgres({
      bin: this.bin,
      user: this.user,
      work: this.work,
      logs: this.logs,
      sync: this.o.sync,
      cleanup: this.cleanup,
    }));
    this.phase("postgres");
    this.progress(
      `PostgreSQL ${this.pgVersion} (${this.bin}${this.user.asRoot ? ", as user postgres" : ""}): primary 127.0.0.1:${this.primary.port}, ` +
        `standby 127.0.0.1:${this.standby.port} streaming ${this.o.sync ? "synchronously (synchronous_standby_names='standby')" : "asynchronously"}`,
    );
  }

  /** Kept when the drill did not pass (and was not interrupted), else removed. */
  private removeLogs(): void {
    if (this.keepLogs && !this.cleanup.interrupted) this.keptLogsAt = this.logs;
    else rmSync(this.logs, { recursive: true, force: true });
  }

  // ── 3–4. Target and regions ─────────────────────────────────────────────────────────

  private async spawn(name: string, args: string[], databaseUrl: string): Promise<SchedulerProc> {
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

  private async stopProc(name: string): Promise<void> {
    const p = this.procs.get(name);
    if (!p) return;
    this.procs.delete(name);
    await p.stop();
  }

  private async startRegions(): Promise<void> {
    this.target = new DrillTarget();
    const target = this.target;
    this.cleanup.add(
      "webhook target",
      () => target.stop(),
      () => target.stop(),
    );

    const primaryDb = this.primary.url("scheduler");
    const aAll = await this.spawn("a-all", ["--mode=all", "--region=a"], primaryDb);
    await aAll.waitForLog(STARTED, this.t.startTimeoutMs, '"scheduler started"');
    const aWorker = await this.spawn("a-worker", ["--mode=worker", "--region=a"], primaryDb);
    const bAll = await this.spawn("b-all", ["--mode=all", "--region=b"], this.standby.url("scheduler"));
    await aWorker.waitForLog(STARTED, this.t.startTimeoutMs, '"scheduler started"');
    // Region B on a read-only standby: it must wait for the promotion, not start.
    const seen = await bAll.waitForLog((l) => WAITING_FOR_PROMOTION(l) || STARTED(l), this.t.startTimeoutMs, "it to wait for the standby's promotion");
    if (STARTED(seen))
      this.notes.push(
        `region b logged "scheduler started" on the standby before any promotion (expected it to log "database is read-only (a standby): waiting for it to be promoted" and wait)`,
      );
    const view = await getCluster(aAll.url, 2000);
    this.gOld = typeof view?.generation === "number" ? view.generation : null;
    if (view?.generation === undefined) this.notes.push(`region a's GET /v1/cluster had no "generation" (got ${JSON.stringify(view)})`);
    if (view && view.role !== "home") this.notes.push(`region a's GET /v1/cluster said role ${JSON.stringify(view.role)} before the kill (expected "home")`);
    this.phase("schedulers");
    this.progress(
      `target ${target.url}; region a: ${aAll.url} (all, pid ${aAll.pid}) + worker (pid ${aWorker.pid}) on the primary, generation ${this.gOld ?? "?"}; ` +
        `region b: ${bAll.url} (all, pid ${bAll.pid}) on the standby, ${STARTED(seen) ? "started" : "waiting for promotion"}`,
    );
  }

  // ── 5–6. Load, then kill region A ───────────────────────────────────────────────────

  private loadDone: Promise<void> | undefined;

  private async loadAndKill(): Promise<void> {
    const target = this.target!;
    const aAll = this.procs.get("a-all")!.proc;
    const bAll = this.procs.get("b-all")!.proc;
    this.load = new Load({
      jobs: this.o.jobs,
      targetUrl: target.url,
      apis: new Map([
        ["a", aAll.url],
        ["b", bAll.url],
      ]),
      home: "a",
      windowMs: this.t.loadWindowMs,
      minDueMs: this.t.minDueMs,
      maxDueMs: this.t.maxDueMs,
    });
    const load = this.load;
    const tick = {
      id: "drill-tick",
      cron: "* * * * * *",
      timezone: "UTC",
      target: { url: `${target.url}${SCHEDULE_PATH}` },
      misfire: "fire_once",
      overlap: "allow",
    };
    const sched = await withTimeout(this.t.startTimeoutMs, () => load.createSchedule(tick), null);
    if (!sched) throw new DrillError(`could not create the schedule drill-tick through region a's API (${aAll.url}); log: ${aAll.o.logFile}`);
    this.loadDone = load.run();
    const third = Math.ceil(this.o.jobs / 3);
    const half = Math.ceil(this.o.jobs / 2);
    const deadline = Date.now() + this.t.loadWindowMs + 30_000;
    // About a third acknowledged, and something delivered already (so some jobs are due
    // before the kill), or half acknowledged.
    for (;;) {
      const acked = load.acknowledged;
      const delivered = target.calls.some((c) => c.accepted && c.path.startsWith("/j/"));
      if (acked >= third && (delivered || acked >= half)) break;
      if (Date.now() > deadline)
        throw new DrillError(
          `only ${acked} of ${this.o.jobs} jobs acknowledged by region a after ${Math.round((Date.now() - load.startedAt) / 1000)} s (last error: ${load.jobs.find((j) => j.lastError)?.lastError ?? "none"}); log: ${aAll.o.logFile}`,
        );
      await Bun.sleep(20);
    }
    this.phase("load_until_kill");
    const acked = load.acknowledged;
    const delivered = new Set(target.calls.filter((c) => c.accepted && c.path.startsWith("/j/")).map((c) => c.key)).size;
    const aWorker = this.procs.get("a-worker")!.proc;
    aAll.kill("SIGKILL");
    aWorker.kill("SIGKILL");
    this.killAt = Date.now();
    await Promise.all([aAll.exited, aWorker.exited]);
    await this.primary.stopImmediate();
    this.progress(
      `killed region a: ${acked}/${this.o.jobs} jobs acknowledged, ${delivered} delivered, ${target.calls.filter((c) => c.path === SCHEDULE_PATH).length} schedule ticks; ` +
        `SIGKILL to pids ${aAll.pid} and ${aWorker.pid}, primary stopped -m immediate`,
    );
    await this.stopProc("a-all");
    await this.stopProc("a-worker");
  }

  // ── 6. Promotion and takeover ───────────────────────────────────────────────────────

  private async failover(): Promise<void> {
    const killAt = this.killAt!;
    const bAll = this.procs.get("b-all")!.proc;
    await this.standby.promote();
    this.promoteMs = Date.now() - killAt;
    this.phase("kill_to_promoted");
    this.progress(`standby promoted (pg_is_in_recovery() false) ${this.promoteMs} ms after the kill`);

    const took = await bAll.waitForLog(TOOK_OVER, this.t.takeoverTimeoutMs, '"took over region authority"');
    const loggedAt = typeof took.time === "string" ? Date.parse(took.time) : NaN;
    this.takeoverMs = (Number.isFinite(loggedAt) ? loggedAt : Date.now()) - killAt;
    this.takeover = { from: took.from, to: took.to, generation: took.generation };
    let view = await getCluster(bAll.url, 2000);
    const end = Date.now() + 10_000;
    while (view?.role !== "home" && Date.now() < end) {
      await Bun.sleep(100);
      view = await getCluster(bAll.url, 2000);
    }
    if (typeof view?.generation === "number") this.gNew = view.generation;
    else if (typeof took.generation === "number") {
      this.gNew = took.generation;
      this.notes.push(
        `region b's GET /v1/cluster had no numeric "generation" after the takeover (got ${JSON.stringify(view)}); used the generation from its "took over region authority" log line`,
      );
    } else
      throw new DrillError(
        `region b took over but neither GET /v1/cluster nor its log says the new generation (cluster: ${JSON.stringify(view)}, log: ${JSON.stringify(took)})`,
      );
    if (view?.role !== "home") this.notes.push(`region b's GET /v1/cluster still said role ${JSON.stringify(view?.role)} 10 s after it logged the takeover`);
    if (typeof took.generation === "number" && took.generation !== this.gNew)
      this.notes.push(`region b logged generation ${took.generation} at takeover, GET /v1/cluster says ${this.gNew}`);
    if (this.gOld !== null && this.gNew <= this.gOld) this.notes.push(`the generation did not increase at takeover (${this.gOld} → ${this.gNew})`);
    this.phase("promoted_to_takeover");
    this.progress(
      `region b took over the authority (from ${String(took.from)} to ${String(took.to)}, generation ${this.gNew}) ${this.takeoverMs} ms after the kill`,
    );

    const floor = BigInt(this.gNew) << 32n;
    const first = await this.target!.waitFor((c) => c.accepted && c.token !== null && c.token >= floor, this.t.takeoverTimeoutMs);
    if (!first)
      throw new DrillError(
        `region b took over but no call with a generation-${this.gNew} token reached the target within ${this.t.takeoverTimeoutMs} ms; log: ${bAll.o.logFile}\n${bAll.lastOutput()}`,
      );
    this.phase("takeover_to_first_call");
    this.progress(`first call accepted from region b (${first.key}, token ${first.token}) ${first.at - killAt} ms after the kill`);
  }

  // ── 7. Every acknowledged job delivered ─────────────────────────────────────────────

  private async drain(): Promise<void> {
    const load = this.load!;
    const target = this.target!;
    const settled = await withTimeout(this.t.drainGraceMs, () => this.loadDone!.then(() => true), false);
    if (!settled) {
      load.stop();
      const pending = load.jobs.filter((j) => j.ackAt === null && j.rejected === null);
      this.notes.push(
        `${pending.length} create(s) never acknowledged within ${this.t.drainGraceMs} ms of the takeover (last error: ${pending[0]?.lastError ?? "?"})`,
      );
    }
    const rejected = load.jobs.filter((j) => j.rejected !== null);
    if (rejected.length) this.notes.push(`${rejected.length} create(s) refused for good, e.g. ${rejected[0].key}: ${rejected[0].rejected}`);
    this.progress(`load done: ${load.jobs.length} created, ${load.acknowledged} acknowledged, ${load.requests} requests`);
    const acked = load.jobs.filter((j) => j.ackAt !== null);
    const lastDue = Math.max(0, ...acked.map((j) => j.runAt));
    const deadline = lastDue + this.t.drainGraceMs;
    const accepted = () => new Set(target.calls.filter((c) => c.accepted).map((c) => c.key));
    let missing = acked.length;
    for (;;) {
      const got = accepted();
      missing = acked.filter((j) => !got.has(j.key)).length;
      if (missing === 0 || Date.now() > deadline) break;
      await Bun.sleep(100);
    }
    this.phase("drain");
    this.progress(
      `${acked.length - missing}/${acked.length} acknowledged jobs delivered${missing ? ` (${missing} still missing ${this.t.drainGraceMs} ms after the last due time)` : ""}`,
    );
  }

  // ── 8. The old home comes back on its old database ─────────────────────────────────

  private async oldHomeComesBack(): Promise<void> {
    const target = this.target!;
    const gNew = this.gNew!;
    this.oldRegionFrom = Date.now();
    // It has no standby any more; with synchronous_standby_names still set, its writes would
    // wait forever and it would never call anything, which would test nothing.
    await this.primary.start({ port: this.primary.port, settings: { synchronous_standby_names: "" } });
    const again = await this.spawn("a-all-again", ["--mode=all", "--region=a"], this.primary.url("scheduler"));
    await again.waitForLog(STARTED, this.t.startTimeoutMs, '"scheduler started"');
    this.progress(
      `old primary restarted as an independent primary (split brain) on 127.0.0.1:${this.primary.port}; region a's all-in-one process ${again.url} (pid ${again.pid}) on it`,
    );
    const from = this.oldRegionFrom;
    const isOld = (c: TargetCall) => c.at >= from && c.token !== null && generationOf(c.token) < gNew;
    const first = await target.waitFor(isOld, this.t.oldRegionWaitMs);
    if (first) await Bun.sleep(this.t.oldRegionExtraMs);
    else
      this.notes.push(
        `the old home made no call within ${this.t.oldRegionWaitMs} ms of starting on its old database: fencing at the target was not exercised this run; log: ${again.o.logFile}`,
      );
    await this.stopProc("a-all-again");
    await this.primary.stopImmediate();
    const calls = target.calls.filter(isOld);
    this.phase("old_home");
    this.progress(
      `old home: ${calls.length} calls with a generation < ${gNew} token, ${calls.filter((c) => c.accepted).length} accepted, ${calls.filter((c) => !c.accepted).length} refused (409)`,
    );
  }
}
