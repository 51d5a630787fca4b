/**
 * Issue 14, hole 3: a job's fencing token never goes down, across failovers (A → B → A),
 * shard handoffs, restarts, shard-count changes and reschedules, and two shard acquisitions
 * from the same snapshot never share an epoch. A target that keeps the highest token per
 * job (what the README advises) must never answer 409 to a legitimate call: 409 is
 * permanent, the job would die.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { moveAuthority, seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { claimDue } from "../../src/store/dispatch-queries.ts";
import { rescheduleJob } from "../../src/store/jobs.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { acquireShards, releaseShards, shardOfJob, type ShardFence, type ShardHold } from "../../src/store/shards.ts";
import { completeAttempts, startAttempts } from "../../src/store/worker-queries.ts";
import { fencingToken } from "../../src/region/fencing.ts";
import { createDatabase, dropDatabase, DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { PerJobFencingTarget, tokenOfCall } from "../helpers/fencing-target.ts";
import { insertJob, jobRow, newJob } from "../helpers/jobs.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";
import { holdLocks } from "../helpers/paused-db.ts";
import { eventually } from "../helpers/target.ts";
import { insertJobs } from "../../src/store/jobs.ts";

const by = { actor: "test", reason: "fencing drill" };
const TTL = 60_000;

/** Takes `shards` (of `count`) for `owner` in `region`, first letting every earlier holder's leases of them lapse. */
async function take(db: Db, owner: string, shards: number[], o: { region: string; generation: number; count: number }): Promise<ShardFence> {
  await db.query("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name = ANY($1::text[])", [shards.map((s) => `dispatch:${s}`)]);
  const got = await acquireShards(db, { owner, shards, ttlMs: TTL, skewMs: 0, region: o.region });
  expect(got.map((h) => h.shard).sort()).toEqual([...shards].sort());
  return { owner, shards: got, count: o.count, region: o.region, generation: o.generation };
}

const maxEpoch = (hs: ShardHold[]) => Math.max(...hs.map((h) => h.epoch));

/**
 * One call of `id` that fails transiently, as a worker in `region` would make it: claimed
 * straight into running under `fence` with `token`, attempt opened, retry recorded (due now).
 * Returns the token the call carried.
 */
async function callAndRetry(db: Db, fence: ShardFence, token: number, id: string): Promise<number> {
  const worker = `${fence.owner}-worker`;
  const [row] = await claimDue(db, { fence, limit: 10, token, ttlMs: TTL, worker });
  expect(row?.id).toBe(id);
  const [att] = await startAttempts(db, worker, fence.region, [{ id, gen: row!.lease_generation, version: row!.version }], { ttlMs: TTL, marginMs: 0 });
  expect(att).toBeDefined();
  const done = await completeAttempts(db, worker, [
    {
      job_id: id,
      gen: row!.lease_generation,
      attempt_id: att!.attempt_id,
      outcome: "transient",
      http_status: 500,
      error: "HTTP 500",
      possibly_delivered: false,
      started_at: new Date(),
      finished_at: new Date(),
      next_status: "scheduled",
      next_delay_ms: 0,
      last_error: "HTTP 500",
      counts_try: true,
      throttle_until: null,
      dead_reason: null,
    },
  ]);
  expect(done).toHaveLength(1);
  return Number(row!.epoch);
}

/** The tokens of a job's calls (its attempt rows), in call order. */
async function callTokens(db: Db, id: string): Promise<number[]> {
  const rows = await db.query<{ epoch: string }>("SELECT epoch FROM attempts WHERE job_id = $1 ORDER BY number", [id]);
  return rows.map((r) => Number(r.epoch));
}

const nonDecreasing = (xs: number[]) => xs.every((x, i) => i === 0 || x >= xs[i - 1]!);

for (const driver of DRIVERS) {
  describe(`fencing tokens never go down for a job (${driver})`, () => {
    let t: TestDb;
    beforeEach(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "a");
    });
    afterEach(async () => {
      await t.close();
    });

    test("A → B → A: a process that kept its epoch, then a fresh one; the job's retry is never stamped lower", async () => {
      const db = t.db;
      // Generation 0, home a: forty handoffs of shard 0 (restarts, rebalances) raise its epoch.
      for (let i = 0; i < 39; i++) {
        const h = await take(db, `early-${i}`, [0], { region: "a", generation: 0, count: 1 });
        expect(await releaseShards(db, h.owner, h.shards)).toEqual([0]);
      }
      const warmBefore = await take(db, "warm", [0], { region: "a", generation: 0, count: 1 });
      const kept = maxEpoch(warmBefore.shards);
      expect(kept).toBeGreaterThanOrEqual(40);
      // A → B → A: two fenced moves, generation 2.
      await moveAuthority(db, { to: "b", ttlMs: TTL, by, action: "cluster.failover" });
      await moveAuthority(db, { to: "a", ttlMs: TTL, by, action: "cluster.failover" });
      // The warm process takes shard 0 again. A process that kept its old epoch stamps with
      // the higher of the two: what the dispatcher did before the fix.
      const warm = await take(db, "warm", [0], { region: "a", generation: 2, count: 1 });
      const job = await insertJob(db);
      const t1 = await callAndRetry(db, warm, fencingToken(2, Math.max(kept, maxEpoch(warm.shards))), job.id);
      // The warm process dies; a fresh one (nothing kept) takes shard 0 after the lapse.
      const fresh = await take(db, "fresh", [0], { region: "a", generation: 2, count: 1 });
      // One monotonic source of epochs, never reset: above every epoch handed out before.
      expect(maxEpoch(fresh.shards)).toBeGreaterThan(kept);
      expect(maxEpoch(fresh.shards)).toBeGreaterThan(maxEpoch(warm.shards));
      const t2 = await callAndRetry(db, fresh, fencingToken(2, maxEpoch(fresh.shards)), job.id);
      expect(t2).toBeGreaterThanOrEqual(t1);
      expect(t1).toBeGreaterThanOrEqual(fencingToken(2, 0));
      expect(nonDecreasing(await callTokens(db, job.id))).toBe(true);
      // The stale warm hold of generation 0 claims nothing: refused in the database.
      expect(await claimDue(db, { fence: warmBefore, limit: 10, token: fencingToken(2, kept), ttlMs: TTL })).toEqual([]);
    });

    test("across shards of one job (a shard-count change), a reschedule and a lower-term holder: the stamp never goes below the job's token", async () => {
      const db = t.db;
      // A job in shard 1 of 2 (and, as every job, in shard 0 of 1).
      let spec = newJob();
      while (shardOfJob(spec.id, 2) !== 1) spec = newJob();
      const [{ job }] = await insertJobs(db, [spec]);
      // Shard 1 of 2 is taken first (lower epoch), shard 0 (of 1, the whole range) later.
      const low = await take(db, "low", [1], { region: "a", generation: 0, count: 2 });
      const high = await take(db, "high", [0], { region: "a", generation: 0, count: 1 });
      expect(maxEpoch(high.shards)).toBeGreaterThan(maxEpoch(low.shards));
      const t1 = await callAndRetry(db, high, fencingToken(0, maxEpoch(high.shards)), job.id);
      // The job's next claim comes from the holder of its shard under 2 shards: a lower term.
      const t2 = await callAndRetry(db, low, fencingToken(0, maxEpoch(low.shards)), job.id);
      expect(t2).toBeGreaterThanOrEqual(t1);
      // Rescheduled (a new version, back to scheduled): its next call still carries at least
      // the highest token any earlier call of it carried.
      expect(await rescheduleJob(db, job.id, null, new Date(Date.now() - 10), null, by)).toBeDefined();
      const t3 = await callAndRetry(db, low, fencingToken(0, maxEpoch(low.shards)), job.id);
      expect(t3).toBeGreaterThanOrEqual(t2);
      expect(nonDecreasing(await callTokens(db, job.id))).toBe(true);
      expect(Number((await jobRow(db, job.id)).epoch)).toBeGreaterThanOrEqual(t1);
    });
  });
}

describe("two shard acquisitions at once (postgres)", () => {
  let url: string;
  let db: Db;
  beforeAll(async () => {
    url = await createDatabase();
    db = openPostgres({ url, maxConnections: 6 });
    await migrate(db);
    await seedAuthority(db, "a");
  });
  afterAll(async () => {
    await db.close();
    await dropDatabase(url);
  });

  test("they skip lease rows another transaction has locked (never wait on them), then take distinct epochs, above every earlier one", async () => {
    // Shards 0 and 1 exist, free, at known epochs.
    const seed = await acquireShards(db, { owner: "seed", shards: [0, 1], ttlMs: TTL, skewMs: 0, region: "a" });
    expect(await releaseShards(db, "seed", seed)).toHaveLength(2);
    const before = maxEpoch(seed);
    // The test locks both lease rows, as a paused holder's claim would. Acquisitions used to
    // wait on such a lock (computing their rows first); now they leave the rows for later.
    const holder = await holdLocks(db, "SELECT name FROM leases WHERE name IN ('dispatch:0', 'dispatch:1') FOR UPDATE");
    try {
      const waited = Bun.sleep(2000).then(() => "waited" as const);
      const skipped = await Promise.race([
        Promise.all([
          acquireShards(db, { owner: "X", shards: [0], ttlMs: TTL, skewMs: 0, region: "a" }),
          acquireShards(db, { owner: "Y", shards: [1], ttlMs: TTL, skewMs: 0, region: "a" }),
        ]),
        waited,
      ]);
      expect(skipped).toEqual([[], []]);
    } finally {
      await holder.release();
    }
    // Free again: both at once.
    const x = acquireShards(db, { owner: "X", shards: [0], ttlMs: TTL, skewMs: 0, region: "a" });
    const y = acquireShards(db, { owner: "Y", shards: [1], ttlMs: TTL, skewMs: 0, region: "a" });
    const [hx, hy] = await Promise.all([x, y]);
    expect(hx).toHaveLength(1);
    expect(hy).toHaveLength(1);
    expect(hx[0]!.epoch).not.toBe(hy[0]!.epoch);
    expect(Math.min(hx[0]!.epoch, hy[0]!.epoch)).toBeGreaterThan(before);
    // And the next acquisition is above both.
    expect(await releaseShards(db, "X", hx)).toEqual([0]);
    const [next] = await acquireShards(db, { owner: "Z", shards: [0], ttlMs: TTL, skewMs: 0, region: "a" });
    expect(next!.epoch).toBeGreaterThan(Math.max(hx[0]!.epoch, hy[0]!.epoch));
  });

  test("takers racing for one shard, never held before and then lapsed: exactly one gets it each time, at an epoch above the last", async () => {
    let last = 0;
    for (let round = 0; round < 20; round++) {
      // Round 0 takes shard 7 new (the insert); every later round takes it lapsed (the update).
      if (round > 0) await db.query("UPDATE leases SET lease_until = now() - interval '1 hour' WHERE name = 'dispatch:7'");
      const got = await Promise.all(
        Array.from({ length: 6 }, (_, i) => acquireShards(db, { owner: `T${round}-${i}`, shards: [7], ttlMs: TTL, skewMs: 0, region: "a" })),
      );
      const winners = got.filter((g) => g.length === 1);
      expect(winners).toHaveLength(1);
      expect(winners[0]![0]!.epoch).toBeGreaterThan(last);
      last = winners[0]![0]!.epoch;
      const [row] = await db.query<{ owner: string; epoch: string }>("SELECT owner, epoch FROM leases WHERE name = 'dispatch:7'");
      expect(Number(row!.epoch)).toBe(last);
      expect(row!.owner).toBe(`T${round}-${got.findIndex((g) => g.length === 1)}`);
    }
  });
});

describe("A → B → A with real scheduler processes and a per-job fencing target (postgres)", () => {
  let url: string;
  let db: Db;
  const procs: Proc[] = [];
  let release!: () => void;
  const hold = new Promise<Response>((r) => (release = () => r(new Response("late"))));
  // The job's first call is held open (the process that made it is killed meanwhile); every
  // later call succeeds.
  const target = new PerJobFencingTarget((_r, n) => (n === 1 ? hold : new Response("ok")));

  beforeAll(async () => {
    url = await createDatabase();
    db = openPostgres({ url, maxConnections: 3 });
    await migrate(db);
    await seedAuthority(db, "a", 0);
  });
  afterAll(async () => {
    release();
    for (const p of procs) kill(p);
    await Promise.all(procs.map((p) => p.exited));
    target.stop();
    await db.close();
    await dropDatabase(url);
  });

  const env = () => ({
    DATABASE_URL: url,
    HOME_REGION: "a",
    SCHEDULER_SHARDS: "1",
    SCHEDULER_AUTO_FAILOVER: "0",
    SCHEDULER_LEADER_TTL: "1s",
    SCHEDULER_LEASE_TTL: "2s",
    SCHEDULER_CLOCK_SKEW: "200ms",
    SCHEDULER_AUTHORITY_TTL: "5s",
    LOG_LEVEL: "info",
  });
  const start = async () => {
    const p = await spawnScheduler(["--mode=all", "--region=a"], env());
    procs.push(p);
    return p;
  };
  const taken = (p: Proc) => p.logs().filter((l) => l.msg === "shards taken");

  test("a warm process and then a fresh one call the same job: its tokens never go down, the target never answers 409", async () => {
    // Generation 0: forty handoffs of the one shard before the warm process starts.
    for (let i = 0; i < 39; i++) {
      const [h] = await acquireShards(db, { owner: `early-${i}`, shards: [0], ttlMs: TTL, skewMs: 0, region: "a" });
      expect(await releaseShards(db, `early-${i}`, [h!])).toEqual([0]);
    }
    const warm = await start();
    await eventually(() => taken(warm).length > 0, 10_000, "the warm process to take the shard");
    const kept = Math.max(...(taken(warm)[0]!.epochs as number[]));
    expect(kept).toBeGreaterThanOrEqual(40);

    // A → B → A (scheduler failover twice). Nobody runs in b; the warm process loses its
    // shard at the first move and takes it again after the second.
    await moveAuthority(db, { to: "b", ttlMs: 5000, by, action: "cluster.failover" });
    await warm.waitForLog((l) => String(l.msg).startsWith("shards lost"), 10_000);
    const takenBefore = taken(warm).length;
    await moveAuthority(db, { to: "a", ttlMs: 5000, by, action: "cluster.failover" });
    await eventually(() => taken(warm).length > takenBefore, 10_000, "the warm process to take the shard again in generation 2");

    const created = await api(warm.url, "POST", "/v1/jobs", {
      target: { url: `${target.url}/j` },
      idempotency_key: "fenced-job",
      timeout: "30s",
      retry: { max_attempts: 5, base: "100ms", max: "100ms" },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await target.target.waitForCalls(1, 10_000);
    const first = target.calls[0]!;
    expect(tokenOfCall(first)).toBeGreaterThanOrEqual(BigInt(fencingToken(2, 0)));

    // The warm process dies with the call in flight; a fresh process reaps the job after
    // its lease lapses and calls it again: the retry of the same job.
    kill(warm);
    await warm.exited;
    const fresh = await start();
    await target.target.waitForCalls(2, 20_000);
    const second = target.calls[1]!;
    expect(second.headers["webhook-id"]).toBe(id);
    const final = await eventually(
      async () => {
        const [r] = await db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [id]);
        return r && ["succeeded", "dead"].includes(r.status) ? r.status : undefined;
      },
      10_000,
      "the job to finish",
    );

    expect(target.refused.map((c) => c.headers["scheduler-fencing-token"])).toEqual([]);
    expect(tokenOfCall(second)).toBeGreaterThanOrEqual(tokenOfCall(first));
    expect(final).toBe("succeeded");
    expect(taken(fresh).length).toBeGreaterThan(0);
    expect(nonDecreasing(await callTokens(db, id))).toBe(true);
  });
});
