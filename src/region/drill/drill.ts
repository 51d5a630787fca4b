import { analyze } from "./analyze.ts";
import { DrillState, SCHEDULE_PATH } from "./drill-state.ts";
import { DrillError } from "./errors.ts";
import { explainFindings } from "./explain.ts";
import { machineInfo } from "./machine.ts";
import { drain } from "./phase-drain.ts";
import { loadAndKill } from "./phase-load-kill.ts";
import { oldHomeComesBack } from "./phase-old-home.ts";
import { startPostgres } from "./phase-postgres.ts";
import { startRegions } from "./phase-regions.ts";
import { promoteAndTakeOver } from "./phase-takeover.ts";
import type { DrillReport } from "./report.ts";
import type { FailoverDrillOptions } from "./settings.ts";

/**
 * A real local failover drill: PostgreSQL primary + streaming standby, region A (two
 * scheduler processes) on the primary, region B (one) on the standby, a recording target;
 * load, kill A, promote, B takes over by itself, drain, bring the old home back, report.
 * Resolves with the report whatever happened (a phase that failed is in `error`); every
 * process it started is gone and its temp dir removed when it resolves. The phases are
 * phase-*.ts, in the order below; what they share is a DrillState.
 */
export function runFailoverDrill(opts: FailoverDrillOptions): Promise<DrillReport> {
  return run(new DrillState(opts));
}

async function run(s: DrillState): Promise<DrillReport> {
  const startedAt = new Date().toISOString();
  const onExit = () => s.cleanup.runSync();
  process.on("exit", onExit);
  let error: string | null = null;
  try {
    await startPostgres(s);
    await startRegions(s);
    await loadAndKill(s);
    await promoteAndTakeOver(s);
    await drain(s);
    await oldHomeComesBack(s);
  } catch (err) {
    error = err instanceof DrillError ? err.message : ((err as Error)?.stack ?? String(err));
    // Before the schedulers run (no PostgreSQL, initdb failed…), drillMain prints the one line.
    if (s.ranSchedulers) s.progress(`failed: ${error.split("\n")[0]}`);
  }
  s.load?.stop();
  // Stop every scheduler before counting, so no call lands after the analysis.
  for (const { stop } of s.procs.values()) await stop().catch(() => {});
  const a = analyze({
    calls: s.target?.calls ?? [],
    jobs: s.load?.jobs ?? [],
    schedulePath: SCHEDULE_PATH,
    killAt: s.killAt,
    newGeneration: s.gNew,
    oldRegionFrom: s.oldRegionFrom,
  });
  const passed = a.passed && error === null;
  s.keepLogs = !passed && !s.cleanup.interrupted;
  const failures = await s.cleanup.run();
  s.phase("teardown");
  process.off("exit", onExit);
  for (const f of failures) s.notes.push(`cleanup: ${f}`);
  s.notes.push(...explainFindings(a, s.o.sync));
  const report: DrillReport = {
    drill: "failover",
    ...a,
    passed,
    sync: s.o.sync,
    jobs_requested: s.o.jobs,
    started_at: startedAt,
    finished_at: new Date().toISOString(),
    generation_before: s.gOld,
    generation_after: s.gNew,
    promote_ms: s.promoteMs,
    takeover_ms: s.takeoverMs,
    takeover: s.takeover,
    create_requests: s.load?.requests ?? 0,
    create_retries: Object.fromEntries(s.load?.retries ?? []),
    phases_ms: s.phases,
    postgres: { version: s.pgVersion, bin: s.bin },
    machine: machineInfo(),
    notes: s.notes,
    error,
    logs_dir: s.keptLogsAt,
  };
  if (s.ranSchedulers)
    s.progress(
      `${passed ? "PASSED" : "FAILED"}: lost ${a.lost}, duplicates ${a.duplicates_accepted}, early ${a.early}, old home accepted ${a.old_region_accepted}, misfire ${a.misfire_ok ? "ok" : "NOT ok"}, rto ${a.rto_ms ?? "—"} ms`,
    );
  return report;
}
