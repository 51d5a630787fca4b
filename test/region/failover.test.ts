/**
 * Region authority with real processes on one Postgres (regions share the database, as on
 * Fly with one primary): automatic takeover waits TTL + margin, can be disabled, a manual
 * failover fences the old region at once, and a home leader paused past its lease (SIGSTOP)
 * delivers nothing after it wakes. Postgres only: several processes share the database.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import type { Db } from "../../src/store/db.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

const GEN1 = 2 ** 32;
const TTL = 1000;
const SKEW = 500;

describe("region failover with real processes (postgres)", () => {
  let url: string;
  let db: Db;
  let procs: Proc[] = [];
  let target: Target;

  beforeEach(async () => {
    url = await createDatabase();
    db = openPostgres({ url, maxConnections: 2 });
    target = new Target();
  });
  afterEach(async () => {
    for (const p of procs) {
      p.proc.kill("SIGCONT");
      kill(p);
    }
    await Promise.all(procs.map((p) => p.exited));
    procs = [];
    target.stop();
    await db.close();
    await dropDatabase(url);
  });

  const env = (extra: Record<string, string> = {}) => ({
    DATABASE_URL: url,
    HOME_REGION: "a",
    SCHEDULER_AUTHORITY_TTL: `${TTL}ms`,
    SCHEDULER_CLOCK_SKEW: `${SKEW}ms`,
    SCHEDULER_LEADER_TTL: "1s",
    SCHEDULER_LEASE_TTL: "2s",
    ...extra,
  });
  async function region(name: string, extra: Record<string, string> = {}): Promise<Proc> {
    const p = await spawnScheduler(["--mode=all", `--region=${name}`], env(extra));
    procs.push(p);
    return p;
  }
  const cluster = async (p: Proc) => (await api(p.url, "GET", "/v1/cluster")).body;
  const token = (c: { headers: Record<string, string> }) => Number(c.headers["scheduler-fencing-token"]);
  const createJob = (p: Proc, path: string, runAt = Date.now()) =>
    api(p.url, "POST", "/v1/jobs", { target: { url: `${target.url}/${path}` }, run_at: new Date(runAt).toISOString(), idempotency_key: path });
  const homeRenewing = (p: Proc) => eventually(async () => (await cluster(p)).holder !== null, 10_000, "the home region's leader to renew the authority");

  test("automatic takeover: the standby waits until the lease has been expired for TTL + margin, then fences with a new generation", async () => {
    const a = await region("a");
    const b = await region("b");
    await homeRenewing(a);
    expect(await cluster(b)).toMatchObject({ region: "b", home_region: "a", role: "standby", generation: 0 });
    // The standby's API sends writes home.
    const refused = await createJob(b, "to-standby");
    expect(refused.status).toBe(409);
    expect(refused.headers.get("fly-replay")).toBe("region=a");

    kill(a);
    await a.exited;
    const [{ lease_until: lastLease }] = await db.query<{ lease_until: Date }>("SELECT lease_until FROM region_authority");
    await eventually(async () => (await cluster(b)).home_region === "b", 15_000, "region b to take over");
    const [takeover] = await db.query<{ at: Date; actor: string; details: any }>("SELECT at, actor, details FROM audit_log WHERE action = 'cluster.takeover'");
    expect(takeover!.details).toMatchObject({ from: "a", to: "b", generation: 1 });
    expect(takeover!.actor).toStartWith("auto:");
    // Both instants are the database's clock.
    const waited = takeover!.at.getTime() - lastLease!.getTime();
    expect(waited).toBeGreaterThanOrEqual(TTL + SKEW);
    expect(waited).toBeLessThan(TTL + SKEW + TTL / 3 + 1500); // one check interval + slack
    expect(b.logs().some((l) => l.msg === "took over region authority" && l.generation === 1)).toBe(true);

    const created = await createJob(b, "after-takeover");
    expect(created.status).toBe(201);
    await target.waitForCalls(1, 10_000);
    expect(token(target.callsTo("/after-takeover")[0]!)).toBeGreaterThanOrEqual(GEN1 + 1);
    expect(target.callsTo("/to-standby")).toEqual([]);
  });

  test("with automatic failover off, the standby waits for an operator; POST /v1/cluster/failover (served by the standby) moves the authority", async () => {
    const a = await region("a");
    const b = await region("b", { SCHEDULER_AUTO_FAILOVER: "0" });
    await homeRenewing(a);
    kill(a);
    await a.exited;
    await Bun.sleep(TTL + SKEW + 1500);
    expect(await cluster(b)).toMatchObject({ home_region: "a", role: "standby", auto_failover: false, takeover_after: null });
    // Admin only (loopback without tokens is admin); a bad body is a 400 with the field.
    const bad = await api(b.url, "POST", "/v1/cluster/failover", { to: "B!" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.path).toBe("to");
    const moved = await api(b.url, "POST", "/v1/cluster/failover", { to: "b", reason: "region a is down" });
    expect(moved.status).toBe(200);
    expect(moved.body.failover).toEqual({ from: "a", to: "b", generation: 1, requeued: 0 });
    expect(moved.body.cluster).toMatchObject({ region: "b", home_region: "b", role: "home", generation: 1 });
    const again = await api(b.url, "POST", "/v1/cluster/failover", { to: "b" });
    expect(again.status).toBe(409);
    const [audit] = await db.query<{ actor: string; reason: string }>("SELECT actor, reason FROM audit_log WHERE action = 'cluster.failover'");
    expect(audit).toEqual({ actor: "local", reason: "region a is down" });
    expect((await createJob(b, "after-failover")).status).toBe(201);
    await target.waitForCalls(1, 10_000);
    expect(token(target.calls[0]!)).toBeGreaterThanOrEqual(GEN1 + 1);
  });

  test("manual failover under load: the old region stops calling at once, every job runs once, later calls carry the new generation", async () => {
    const a = await region("a");
    const b = await region("b");
    await homeRenewing(a);
    const start = Date.now() + 500;
    const jobs = Array.from({ length: 30 }, (_, i) => ({
      target: { url: `${target.url}/m${i}` },
      run_at: new Date(start + i * 100).toISOString(),
      idempotency_key: `m${i}`,
    }));
    expect((await api(a.url, "POST", "/v1/jobs/batch", { jobs })).status).toBe(200);
    await Bun.sleep(start + 1200 - Date.now());
    const moved = await api(b.url, "POST", "/v1/cluster/failover", { to: "b", reason: "planned move" });
    expect(moved.status).toBe(200);
    const fencedAt = Date.now();
    await target.waitForCalls(30, 15_000);
    await Bun.sleep(500);
    for (let i = 0; i < 30; i++) expect(target.callsTo(`/m${i}`)).toHaveLength(1);
    const old = target.calls.filter((c) => token(c) < GEN1);
    const fresh = target.calls.filter((c) => token(c) >= GEN1);
    expect(old.length).toBeGreaterThan(0);
    expect(fresh.length).toBeGreaterThan(0);
    // A call already on the wire when the move committed may land a moment later; nothing
    // from generation 0 starts after it.
    for (const c of old) expect(c.at).toBeLessThan(fencedAt + 200);
    // No pre-call check sent after the answer to the failover request (so after its commit)
    // opened an attempt of generation 0: an attempt's id is a version 7 UUID the worker made
    // just before sending the check (StartAttempts, or the claim that is the check in
    // --mode=all). A check that committed just before the move (the claim's lock on the
    // authority row makes the move wait for it) starts its call a moment later, as a call
    // already on the wire lands a moment later: within the same 200 ms.
    const [late] = await db.query<{ checked: string; started: string }>(
      `SELECT count(*) FILTER (WHERE id >= uuid_v7_floor($2)) AS checked, count(*) FILTER (WHERE started_at > $3) AS started
       FROM attempts WHERE epoch < $1`,
      [GEN1, new Date(fencedAt + 1), new Date(fencedAt + 200)],
    );
    expect([Number(late.checked), Number(late.started)]).toEqual([0, 0]);
    // The old region's leader notices within one leader lease interval, and sends writes on.
    await a.waitForLog((l) => String(l.msg).startsWith("lost leadership"), 1500);
    const w = await createJob(a, "to-old-home");
    expect(w.status).toBe(409);
    expect(w.headers.get("fly-replay")).toBe("region=b");
    expect(await cluster(a)).toMatchObject({ region: "a", home_region: "b", role: "standby" });
  });

  test("a home leader paused past its lease (SIGSTOP) is taken over and delivers nothing after it wakes", async () => {
    const a = await region("a");
    const b = await region("b");
    await homeRenewing(a);
    // Jobs already claimed by a at the pause stay with it: their leases lapse and b's reaper
    // hands them back, so they run once, from b.
    a.proc.kill("SIGSTOP");
    const pausedAt = Date.now();
    await eventually(async () => (await cluster(b)).home_region === "b", 15_000, "region b to take over from the paused leader");
    for (let i = 0; i < 5; i++) expect((await createJob(b, `p${i}`, Date.now() + 300 + i * 200)).status).toBe(201);
    a.proc.kill("SIGCONT");
    const resumedAt = Date.now();
    await target.waitForCalls(5, 15_000);
    await Bun.sleep(1500); // a's timers fire after the pause: give it every chance to misbehave
    expect(target.calls).toHaveLength(5);
    for (const c of target.calls) expect(token(c)).toBeGreaterThanOrEqual(GEN1 + 1);
    expect(resumedAt - pausedAt).toBeGreaterThan(TTL + SKEW);
    await eventually(async () => (await cluster(a)).role === "standby", 5000, "the resumed process to see itself standby");
  });
});
