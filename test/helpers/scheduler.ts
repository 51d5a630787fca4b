import { loadConfig, type Config } from "../../src/config.ts";
import { silentLogger } from "../../src/obs/log.ts";
import { startRuntime, type Runtime, type StartOptions } from "../../src/runtime.ts";
import type { Db } from "../../src/store/db.ts";

/** Test defaults: loopback targets allowed, short intervals, a random port. */
export function testConfig(env: Record<string, string> = {}, flags: { mode?: string } = {}): Config {
  return loadConfig(
    {
      PORT: "0",
      HOST: "127.0.0.1",
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
      // Tests fire per-second schedules (the production default minimum is 10 s).
      SCHEDULER_MIN_SCHEDULE_INTERVAL: "1s",
      SCHEDULER_POLL_INTERVAL: "200ms",
      SCHEDULER_LEASE_TTL: "3s",
      SCHEDULER_LEADER_TTL: "2s",
      SCHEDULER_CLOCK_SKEW: "0",
      SCHEDULER_SHUTDOWN_GRACE: "5s",
      LOG_LEVEL: "silent",
      ...env,
    },
    flags,
  );
}

/** An in-process scheduler on a database the test owns. */
export async function startScheduler(db: Db, env: Record<string, string> = {}, opts: StartOptions & { mode?: string } = {}): Promise<Runtime> {
  return startRuntime(testConfig(env, { mode: opts.mode }), {
    db,
    log: opts.log ?? silentLogger,
    beforeStart: opts.beforeStart,
    afterStartAttempts: opts.afterStartAttempts,
    afterClaim: opts.afterClaim,
    afterClaimReply: opts.afterClaimReply,
    onRun: opts.onRun,
    aheadMaxAgeMs: opts.aheadMaxAgeMs,
    notSeenWaitMs: opts.notSeenWaitMs,
  });
}

/**
 * api, dispatcher and worker as three runtimes on one database: the path through `queued`,
 * where the worker's claim and its pre-call check (StartAttempts) are two statements, with
 * `beforeStart` between them. In `--mode=all` the dispatcher's claim is itself the check of
 * the jobs the worker can call at once (ClaimDueIds): there is no moment between the two.
 */
export async function startSplit(db: Db, env: Record<string, string> = {}, workerOpts: StartOptions = {}) {
  const api = await startScheduler(db, env, { mode: "api" });
  const dispatcher = await startScheduler(db, env, { mode: "dispatcher" });
  const worker = await startScheduler(db, env, { ...workerOpts, mode: "worker" });
  return {
    api,
    dispatcher,
    worker,
    stop: async () => {
      for (const rt of [worker, dispatcher, api]) await rt.stop();
    },
  };
}

/**
 * Resolves once every dispatcher and worker claim loop in these runtimes has run a whole pass
 * started after the call (poked: at once), and what those passes claimed has been called and
 * its outcome written (no job left in a worker's hands). For "nothing more happens" checks:
 * where a fixed sleep proves nothing if the loops did not run in it (a busy machine), this
 * waits until they looked. Jobs that stay claimed (a slow call, an async job) are waited for
 * up to `maxMs`.
 */
export async function afterAPass(rts: Runtime[], maxMs = 5000): Promise<void> {
  for (const rt of rts) await rt.dispatcher?.passDone({ poke: true });
  for (const rt of rts) await rt.worker?.claimPassDone({ poke: true });
  const end = Date.now() + maxMs;
  while (rts.some((rt) => (rt.worker?.inflight.size ?? 0) > 0)) {
    if (Date.now() > end) throw new Error(`afterAPass: jobs still in a worker's hands after ${maxMs} ms`);
    await Bun.sleep(10);
  }
}

/** JSON request against a running scheduler. */
export async function api(rt: Runtime | string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const base = typeof rt === "string" ? rt : rt.url!;
  const res = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: res.status, body: json, headers: res.headers };
}
