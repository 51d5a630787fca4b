import { withTimeout } from "../../time/with-timeout.ts";
import type { DrillState } from "./drill-state.ts";

/** 7. Every acknowledged job delivered, or the drain's grace spent. */
export async function drain(s: DrillState): Promise<void> {
  const load = s.load!;
  const target = s.target!;
  const settled = await withTimeout(s.t.drainGraceMs, () => s.loadDone!.then(() => true), false);
  if (!settled) {
    load.stop();
    const pending = load.jobs.filter((j) => j.ackAt === null && j.rejected === null);
    s.notes.push(`${pending.length} create(s) never acknowledged within ${s.t.drainGraceMs} ms of the takeover (last error: ${pending[0]?.lastError ?? "?"})`);
  }
  const rejected = load.jobs.filter((j) => j.rejected !== null);
  if (rejected.length) s.notes.push(`${rejected.length} create(s) refused for good, e.g. ${rejected[0].key}: ${rejected[0].rejected}`);
  s.progress(`load done: ${load.jobs.length} created, ${load.acknowledged} acknowledged, ${load.requests} requests`);
  const acked = load.jobs.filter((j) => j.ackAt !== null);
  const lastDue = Math.max(0, ...acked.map((j) => j.runAt));
  const deadline = lastDue + s.t.drainGraceMs;
  const accepted = () => new Set(target.calls.filter((c) => c.accepted).map((c) => c.key));
  let missing = acked.length;
  for (;;) {
    const got = accepted();
    missing = acked.filter((j) => !got.has(j.key)).length;
    if (missing === 0 || Date.now() > deadline) break;
    await Bun.sleep(100);
  }
  s.phase("drain");
  s.progress(
    `${acked.length - missing}/${acked.length} acknowledged jobs delivered${missing ? ` (${missing} still missing ${s.t.drainGraceMs} ms after the last due time)` : ""}`,
  );
}
