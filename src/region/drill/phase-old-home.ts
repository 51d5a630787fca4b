import { generationOf, type TargetCall } from "./target.ts";
import { type DrillState, STARTED } from "./drill-state.ts";

/** 8. The old home comes back on its old database (split brain): its calls must be refused by their fencing tokens. */
export async function oldHomeComesBack(s: DrillState): Promise<void> {
  const target = s.target!;
  const gNew = s.gNew!;
  s.oldRegionFrom = Date.now();
  // It has no standby any more; with synchronous_standby_names still set, its writes would
  // wait forever and it would never call anything, which would test nothing.
  await s.primary.start({ port: s.primary.port, settings: { synchronous_standby_names: "" } });
  const again = await s.spawn("a-all-again", ["--mode=all", "--region=a"], s.primary.url("scheduler"));
  await again.waitForLog(STARTED, s.t.startTimeoutMs, '"scheduler started"');
  s.progress(
    `old primary restarted as an independent primary (split brain) on 127.0.0.1:${s.primary.port}; region a's all-in-one process ${again.url} (pid ${again.pid}) on it`,
  );
  const from = s.oldRegionFrom;
  const isOld = (c: TargetCall) => c.at >= from && c.token !== null && generationOf(c.token) < gNew;
  const first = await target.waitFor(isOld, s.t.oldRegionWaitMs);
  if (first) await Bun.sleep(s.t.oldRegionExtraMs);
  else
    s.notes.push(
      `the old home made no call within ${s.t.oldRegionWaitMs} ms of starting on its old database: fencing at the target was not exercised this run; log: ${again.o.logFile}`,
    );
  await s.stopProc("a-all-again");
  await s.primary.stopImmediate();
  const calls = target.calls.filter(isOld);
  s.phase("old_home");
  s.progress(
    `old home: ${calls.length} calls with a generation < ${gNew} token, ${calls.filter((c) => c.accepted).length} accepted, ${calls.filter((c) => !c.accepted).length} refused (409)`,
  );
}
