import { DrillError } from "./errors.ts";
import { getCluster } from "./load.ts";
import { type DrillState, TOOK_OVER } from "./drill-state.ts";

/** 6. The standby promoted; region b takes the authority over by itself and makes its first call. */
export async function promoteAndTakeOver(s: DrillState): Promise<void> {
  const killAt = s.killAt!;
  const bAll = s.procs.get("b-all")!.proc;
  await s.standby.promote();
  s.promoteMs = Date.now() - killAt;
  s.phase("kill_to_promoted");
  s.progress(`standby promoted (pg_is_in_recovery() false) ${s.promoteMs} ms after the kill`);

  const took = await bAll.waitForLog(TOOK_OVER, s.t.takeoverTimeoutMs, '"took over region authority"');
  const loggedAt = typeof took.time === "string" ? Date.parse(took.time) : NaN;
  s.takeoverMs = (Number.isFinite(loggedAt) ? loggedAt : Date.now()) - killAt;
  s.takeover = { from: took.from, to: took.to, generation: took.generation };
  let view = await getCluster(bAll.url, 2000);
  const end = Date.now() + 10_000;
  while (view?.role !== "home" && Date.now() < end) {
    await Bun.sleep(100);
    view = await getCluster(bAll.url, 2000);
  }
  if (typeof view?.generation === "number") s.gNew = view.generation;
  else if (typeof took.generation === "number") {
    s.gNew = took.generation;
    s.notes.push(
      `region b's GET /v1/cluster had no numeric "generation" after the takeover (got ${JSON.stringify(view)}); used the generation from its "took over region authority" log line`,
    );
  } else
    throw new DrillError(
      `region b took over but neither GET /v1/cluster nor its log says the new generation (cluster: ${JSON.stringify(view)}, log: ${JSON.stringify(took)})`,
    );
  if (view?.role !== "home") s.notes.push(`region b's GET /v1/cluster still said role ${JSON.stringify(view?.role)} 10 s after it logged the takeover`);
  if (typeof took.generation === "number" && took.generation !== s.gNew)
    s.notes.push(`region b logged generation ${took.generation} at takeover, GET /v1/cluster says ${s.gNew}`);
  if (s.gOld !== null && s.gNew <= s.gOld) s.notes.push(`the generation did not increase at takeover (${s.gOld} → ${s.gNew})`);
  s.phase("promoted_to_takeover");
  s.progress(`region b took over the authority (from ${String(took.from)} to ${String(took.to)}, generation ${s.gNew}) ${s.takeoverMs} ms after the kill`);

  const floor = BigInt(s.gNew) << 32n;
  const first = await s.target!.waitFor((c) => c.accepted && c.token !== null && c.token >= floor, s.t.takeoverTimeoutMs);
  if (!first)
    throw new DrillError(
      `region b took over but no call with a generation-${s.gNew} token reached the target within ${s.t.takeoverTimeoutMs} ms; log: ${bAll.o.logFile}\n${bAll.lastOutput()}`,
    );
  s.phase("takeover_to_first_call");
  s.progress(`first call accepted from region b (${first.key}, token ${first.token}) ${first.at - killAt} ms after the kill`);
}
