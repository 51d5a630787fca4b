import { withTimeout } from "../../time/with-timeout.ts";
import { DrillError } from "./errors.ts";
import { Load } from "./load.ts";
import { type DrillState, SCHEDULE_PATH } from "./drill-state.ts";

/**
 * 5–6. The schedule through region a's API and the load through both; region a and its
 * primary killed once a third of the load is acknowledged and something was delivered (or
 * half of it is acknowledged).
 */
export async function loadAndKill(s: DrillState): Promise<void> {
  const target = s.target!;
  const aAll = s.procs.get("a-all")!.proc;
  const bAll = s.procs.get("b-all")!.proc;
  s.load = new Load({
    jobs: s.o.jobs,
    targetUrl: target.url,
    apis: new Map([
      ["a", aAll.url],
      ["b", bAll.url],
    ]),
    home: "a",
    windowMs: s.t.loadWindowMs,
    minDueMs: s.t.minDueMs,
    maxDueMs: s.t.maxDueMs,
  });
  const load = s.load;
  const tick = {
    id: "drill-tick",
    cron: "* * * * * *",
    timezone: "UTC",
    target: { url: `${target.url}${SCHEDULE_PATH}` },
    misfire: "fire_once",
    overlap: "allow",
  };
  const sched = await withTimeout(s.t.startTimeoutMs, () => load.createSchedule(tick), null);
  if (!sched) throw new DrillError(`could not create the schedule drill-tick through region a's API (${aAll.url}); log: ${aAll.o.logFile}`);
  s.loadDone = load.run();
  const third = Math.ceil(s.o.jobs / 3);
  const half = Math.ceil(s.o.jobs / 2);
  const deadline = Date.now() + s.t.loadWindowMs + 30_000;
  // About a third acknowledged, and something delivered already (so some jobs are due
  // before the kill), or half acknowledged.
  for (;;) {
    const acked = load.acknowledged;
    const delivered = target.calls.some((c) => c.accepted && c.path.startsWith("/j/"));
    if (acked >= third && (delivered || acked >= half)) break;
    if (Date.now() > deadline)
      throw new DrillError(
        `only ${acked} of ${s.o.jobs} jobs acknowledged by region a after ${Math.round((Date.now() - load.startedAt) / 1000)} s (last error: ${load.jobs.find((j) => j.lastError)?.lastError ?? "none"}); log: ${aAll.o.logFile}`,
      );
    await Bun.sleep(20);
  }
  s.phase("load_until_kill");
  const acked = load.acknowledged;
  const delivered = new Set(target.calls.filter((c) => c.accepted && c.path.startsWith("/j/")).map((c) => c.key)).size;
  const aWorker = s.procs.get("a-worker")!.proc;
  aAll.kill("SIGKILL");
  aWorker.kill("SIGKILL");
  s.killAt = Date.now();
  await Promise.all([aAll.exited, aWorker.exited]);
  await s.primary.stopImmediate();
  s.progress(
    `killed region a: ${acked}/${s.o.jobs} jobs acknowledged, ${delivered} delivered, ${target.calls.filter((c) => c.path === SCHEDULE_PATH).length} schedule ticks; ` +
      `SIGKILL to pids ${aAll.pid} and ${aWorker.pid}, primary stopped -m immediate`,
  );
  await s.stopProc("a-all");
  await s.stopProc("a-worker");
}
