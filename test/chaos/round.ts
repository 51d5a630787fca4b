/**
 * One chaos round: a fresh cluster, the load, the faults of a seeded plan, then the settle
 * (no more faults, everything up, every job due before the end finished) and the checks.
 */
import { join } from "node:path";
import { ApiClient } from "./client.ts";
import { ChaosCluster } from "./cluster.ts";
import { describe, FaultInjector, moveAuthority, planEach, planRandom, type PlannedFault } from "./faults.ts";
import { checkAll, snapshot, type CheckResult } from "./invariants.ts";
import { faultWindows, lateness, type Window } from "./lateness.ts";
import { Load } from "./load.ts";
import { Prng } from "./prng.ts";
import type { RoundResult, RoundStats } from "./report.ts";
import { ChaosTarget } from "./target.ts";

export interface RoundOptions {
  round: number;
  seed: number;
  /** How long the load runs; faults are injected during it. */
  loadMs: number;
  /** "each": every kind `each` times (the short form); "random": a random kind every few seconds. */
  faults: { mode: "each"; each: number } | { mode: "random"; gapMinMs: number; gapMaxMs: number };
  /** One-off jobs created per second. */
  perSecond: number;
  /** Longest wait for the jobs due before the end to finish. */
  settleMs: number;
  say: (line: string) => void;
  /** Where to keep the cluster's logs when an invariant fails. */
  keepLogsIn?: string;
}

const TERMINAL_SQL = "('succeeded','dead','cancelled','expired')";

export async function runRound(o: RoundOptions): Promise<RoundResult> {
  const started = Date.now();
  const prng = new Prng(o.seed);
  const say = (line: string) => o.say(`[chaos r${o.round} +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);
  say(`seed ${o.seed} (replay: CHAOS_SEED=${o.seed})`);
  const cluster = new ChaosCluster();
  const api = new ApiClient(() => cluster.apis());
  const target = new ChaosTarget(async (path, body) => api.request("POST", path, body));
  let load: Load | undefined;
  let injector: FaultInjector | undefined;
  let plan: PlannedFault[] = [];
  let checks: CheckResult[] = [];
  let error: string | null = null;
  let logs: string | null = null;
  try {
    // Every other seed makes schedules' occurrences ahead of their instant: that path under
    // the same faults (taken from the seed, so a replay runs it the same way).
    const occurrenceLeadMs = o.seed % 2 === 0 ? 1000 : 0;
    say(`SCHEDULER_OCCURRENCE_LEAD=${occurrenceLeadMs}ms`);
    await cluster.start(say, occurrenceLeadMs);
    load = new Load({ api, prng: prng.fork("load"), targetUrl: target.url, throttledUrl: target.throttledUrl, perSecond: o.perSecond, label: `r${o.round}` });
    await load.createSchedules();
    const fp = prng.fork("faults");
    // Faults start after a short warm-up and end early enough to finish inside the load.
    const from = 3000;
    const to = Math.max(from + 1000, o.loadMs - 10_000);
    plan = o.faults.mode === "each" ? planEach(fp, o.faults.each, from, to) : planRandom(fp, from, to, o.faults.gapMinMs, o.faults.gapMaxMs);
    say(`fault plan (${plan.length}):\n${plan.map((f) => `    ${describe(f)}`).join("\n")}`);
    injector = new FaultInjector(cluster, plan, say);
    const t0 = Date.now();
    load.run();
    const faults = injector.run(t0);
    await Bun.sleep(o.loadMs);
    injector.stop();
    load.stop();
    const tEnd = await dbNow(cluster);
    say(`load stopped (${load.jobs.length} one-offs); waiting for the faults under way to end`);
    await Promise.race([faults, Bun.sleep(90_000)]);
    const restoreFrom = Date.now();
    const restarted = await restoreAll(cluster, say);
    await load.drain();
    await settle(cluster, tEnd, o.settleMs, say);
    const snap = await snapshot(cluster.db(), target.calls);
    checks = checkAll({ snap, oneOffs: load.jobs, schedules: load.schedules, tEnd });
    // The harness's own restarts at the end (a fault cut short) excuse lateness as a fault does.
    const windows: Window[] = [
      ...faultWindows(injector.records, t0),
      ...(restarted ? [{ kind: "restore" as const, procs: [], from: restoreFrom, to: Number.POSITIVE_INFINITY }] : []),
    ];
    const late = lateness({ snap, oneOffs: load.jobs, schedules: load.schedules, windows });
    checks.push(...late.checks);
    // A process the harness did not kill that died anyway (a database restart, a Redis outage
    // must be survived): the supervisor restarts it, but in production that is an outage.
    checks.push({
      name: "no process died unasked",
      violations: cluster.unexpectedExits.map(
        (e) => `${e.name} exit ${e.code} at ${new Date(e.at).toISOString()}: ${e.lastOutput.split("\n").pop()?.slice(0, 160)}`,
      ),
    });
    const stats = { ...statsOf(snap, load, target, cluster), lateness: { creation: late.creation, call: late.call } };
    const bad = checks.some((c) => c.violations.length > 0);
    if (bad && o.keepLogsIn) {
      logs = join(o.keepLogsIn, `chaos-seed-${o.seed}`);
      cluster.keepLogs(logs);
    }
    return finish(stats);
  } catch (err) {
    error = (err as Error)?.stack ?? String(err);
    if (o.keepLogsIn && cluster.logDir) {
      logs = join(o.keepLogsIn, `chaos-seed-${o.seed}`);
      cluster.keepLogs(logs);
    }
    return finish(emptyStats(cluster));
  } finally {
    load?.stop();
    injector?.stop();
    target.stop();
    const failures = await cluster.close();
    for (const f of failures) say(`cleanup: ${f}`);
  }

  function finish(stats: RoundStats): RoundResult {
    const records = injector?.records ?? plan.map((f) => ({ ...f, startedAt: null, endedAt: null, skipped: null, error: null, detail: "" }));
    return { round: o.round, seed: o.seed, durationMs: Date.now() - started, faults: records, checks, stats, logs, error };
  }
}

/** The database's now() in ms, retried through a restart in progress. */
async function dbNow(cluster: ChaosCluster): Promise<number> {
  const end = Date.now() + 60_000;
  for (;;) {
    try {
      const [r] = await cluster.db().unsafe<{ now: number }[]>("select floor(extract(epoch from now()) * 1000)::float8 as now");
      return r!.now;
    } catch (err) {
      if (Date.now() > end) throw err;
      await Bun.sleep(250);
    }
  }
}

/**
 * Every fault undone, whatever happened: processes running (and not stopped, their switched
 * faults disarmed), PostgreSQL and Redis up, home in region a. True if a process had to be
 * started again.
 */
async function restoreAll(cluster: ChaosCluster, say: (l: string) => void): Promise<boolean> {
  let restarted = false;
  if (!cluster.pg.mayRun) await cluster.pg.start({ port: cluster.pg.port });
  await cluster.redis.start();
  await cluster.redis.command("CLIENT", ["UNPAUSE"]).catch(() => {});
  for (const p of cluster.procs.values()) {
    p.signal("SIGCONT");
    p.setFaults(false);
    if (Object.keys(p.overrides).length > 0 || !p.running) {
      restarted = true;
      p.overrides = {};
      await p.down("SIGTERM");
      await p.up();
    }
  }
  await moveAuthority(cluster, "a");
  say("faults cleared: every process up, postgres and redis up, home region a");
  return restarted;
}

/**
 * Waits until every occurrence due by tEnd has been generated and no job due by tEnd is
 * unfinished (a retry due later is finished enough), or settleMs.
 */
async function settle(cluster: ChaosCluster, tEnd: number, settleMs: number, say: (l: string) => void): Promise<void> {
  const end = Date.now() + settleMs;
  let left = -1;
  while (Date.now() < end) {
    try {
      const [r] = await cluster.db().unsafe<{ n: number }[]>(
        `select (select count(*)::int from jobs where status not in ${TERMINAL_SQL}
           and coalesce(nominal_time, scheduled_for) <= to_timestamp($1::float8 / 1000)
           and not (status = 'scheduled' and due_at > now() and due_at <> 'infinity'))
         + (select count(*)::int from schedules where not paused and next_fire_at <= to_timestamp($1::float8 / 1000)) as n`,
        [tEnd],
      );
      left = r!.n;
      if (left === 0) break;
    } catch {
      // a restart still settling
    }
    await Bun.sleep(500);
  }
  say(
    left === 0
      ? "settled: every job due before the end has finished"
      : `settle gave up after ${settleMs} ms: ${left} jobs (or schedules' generation) due before the end unfinished`,
  );
}

function statsOf(snap: Awaited<ReturnType<typeof snapshot>>, load: Load, target: ChaosTarget, cluster: ChaosCluster): RoundStats {
  const byStatus: Record<string, number> = {};
  for (const j of snap.jobs) byStatus[j.status] = (byStatus[j.status] ?? 0) + 1;
  const accepted = new Map<string, number>();
  for (const c of snap.calls) if (c.webhookId && c.status >= 200 && c.status < 300) accepted.set(c.webhookId, (accepted.get(c.webhookId) ?? 0) + 1);
  return {
    jobs: snap.jobs.length,
    byStatus,
    oneOffs: { created: load.jobs.length, acknowledged: load.jobs.filter((j) => j.id).length, rejected: load.jobs.filter((j) => j.rejected).length },
    calls: snap.calls.length,
    refused409: snap.calls.filter((c) => c.status === 409).length,
    throttled429: snap.calls.filter((c) => c.status === 429).length,
    duplicateDeliveries: [...accepted.values()].filter((n) => n > 1).length,
    lostAttempts: snap.attempts.filter((a) => a.outcome === "lost").length,
    unexpectedExits: cluster.unexpectedExits.map(
      (e) => `${e.name} exit ${e.code} at ${new Date(e.at).toISOString()}: ${e.lastOutput.split("\n").pop()?.slice(0, 160)}`,
    ),
    async: { ...target.asyncStats },
  };
}

function emptyStats(cluster: ChaosCluster): RoundStats {
  return {
    jobs: 0,
    byStatus: {},
    oneOffs: { created: 0, acknowledged: 0, rejected: 0 },
    calls: 0,
    refused409: 0,
    throttled429: 0,
    duplicateDeliveries: 0,
    lostAttempts: 0,
    unexpectedExits: cluster.unexpectedExits.map((e) => `${e.name} exit ${e.code}`),
    async: { accepted: 0, completed: 0, stale: 0, gaveUp: 0 },
  };
}
