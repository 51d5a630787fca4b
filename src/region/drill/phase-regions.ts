import { getCluster } from "./load.ts";
import { DrillTarget } from "./target.ts";
import { type DrillState, STARTED, WAITING_FOR_PROMOTION } from "./drill-state.ts";

/** 3–4. The recording target; region a (all + worker) on the primary, region b (all) on the standby, waiting for its promotion. */
export async function startRegions(s: DrillState): Promise<void> {
  s.target = new DrillTarget();
  const target = s.target;
  s.cleanup.add(
    "webhook target",
    () => target.stop(),
    () => target.stop(),
  );

  const primaryDb = s.primary.url("scheduler");
  const aAll = await s.spawn("a-all", ["--mode=all", "--region=a"], primaryDb);
  await aAll.waitForLog(STARTED, s.t.startTimeoutMs, '"scheduler started"');
  const aWorker = await s.spawn("a-worker", ["--mode=worker", "--region=a"], primaryDb);
  const bAll = await s.spawn("b-all", ["--mode=all", "--region=b"], s.standby.url("scheduler"));
  await aWorker.waitForLog(STARTED, s.t.startTimeoutMs, '"scheduler started"');
  // Region B on a read-only standby: it must wait for the promotion, not start.
  const seen = await bAll.waitForLog((l) => WAITING_FOR_PROMOTION(l) || STARTED(l), s.t.startTimeoutMs, "it to wait for the standby's promotion");
  if (STARTED(seen))
    s.notes.push(
      `region b logged "scheduler started" on the standby before any promotion (expected it to log "database is read-only (a standby): waiting for it to be promoted" and wait)`,
    );
  const view = await getCluster(aAll.url, 2000);
  s.gOld = typeof view?.generation === "number" ? view.generation : null;
  if (view?.generation === undefined) s.notes.push(`region a's GET /v1/cluster had no "generation" (got ${JSON.stringify(view)})`);
  if (view && view.role !== "home") s.notes.push(`region a's GET /v1/cluster said role ${JSON.stringify(view.role)} before the kill (expected "home")`);
  s.phase("schedulers");
  s.progress(
    `target ${target.url}; region a: ${aAll.url} (all, pid ${aAll.pid}) + worker (pid ${aWorker.pid}) on the primary, generation ${s.gOld ?? "?"}; ` +
      `region b: ${bAll.url} (all, pid ${bAll.pid}) on the standby, ${STARTED(seen) ? "started" : "waiting for promotion"}`,
  );
}
