// Region failover A → B with the receiver of test/e2e/exactly-once.test.ts: region A is lost
// (SIGKILL) while its calls wait for their answers (the effects committed); B takes over and
// retries. Then A's calls are replayed, as a delayed duplicate from the network would be: the
// fencing check refuses what B's newer token superseded, and once() answers the rest with the
// first result. One effect per job throughout; with verify, B makes no second call.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { freePort, kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";
import { SupervisedReceiver } from "./receiver-proc.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const GEN1 = 2n ** 32n;

describe("region failover A → B with a stale call replayed (postgres, real processes)", () => {
  let schedulerDb: string;
  let receiverDb: string;
  let rsql: postgres.Sql;
  let receiver: SupervisedReceiver;
  const procs: Proc[] = [];
  const env = () => ({
    DATABASE_URL: schedulerDb,
    SCHEDULER_SIGNING_SECRET: SECRET,
    HOME_REGION: "a",
    SCHEDULER_AUTO_FAILOVER: "0",
    SCHEDULER_LEASE_TTL: "2s",
    SCHEDULER_LEADER_TTL: "1s",
    SCHEDULER_AUTHORITY_TTL: "1s",
  });

  beforeAll(async () => {
    schedulerDb = await createDatabase();
    receiverDb = await createDatabase();
    receiver = new SupervisedReceiver("test/e2e/fault-receiver.ts", await freePort(), { DATABASE_URL: receiverDb, WEBHOOK_SECRET: SECRET, SLOW_MS: "4000" });
    await receiver.start();
    rsql = postgres(receiverDb, { max: 2, onnotice: () => {} });
  }, 60_000);
  afterAll(async () => {
    for (const p of procs) kill(p);
    await Promise.all(procs.map((p) => p.exited));
    await receiver?.stop();
    await rsql?.end();
    if (schedulerDb) await dropDatabase(schedulerDb);
    if (receiverDb) await dropDatabase(receiverDb);
  });

  test("one effect per job after the failover and the replay; the replayed stale call is refused (409) or answered from the marker", async () => {
    const a = await spawnScheduler(["--mode=all", "--region=a"], env());
    const b = await spawnScheduler(["--mode=all", "--region=b"], env());
    procs.push(a, b);
    await eventually(async () => (await api(a.url, "GET", "/v1/cluster")).body.holder !== null, 15_000, "region a to hold the authority");

    const create = async (withVerify: boolean) => {
      const r = await api(a.url, "POST", "/v1/jobs", {
        target: { url: `${receiver.url}/hook`, body: { fault: "slow_after_commit" } },
        retry: { max_attempts: 10, base: "300ms", max: "1s" },
        ...(withVerify ? { verify: { url: `${receiver.url}/hook` } } : {}),
      });
      expect(r.status).toBe(201);
      return r.body.id as string;
    };
    const plain = await create(false);
    const verified = await create(true);
    const effects = async (id: string) => (await rsql`SELECT count(*)::int AS n FROM effects WHERE webhook_id = ${id}`)[0].n as number;
    await eventually(async () => (await effects(plain)) === 1 && (await effects(verified)) === 1, 20_000, "both effects to commit in region a's calls");

    // Region a is lost with both answers pending; the operator moves the authority to b.
    kill(a, "SIGKILL");
    await a.exited;
    const moved = await api(b.url, "POST", "/v1/cluster/failover", { to: "b", reason: "region a lost" });
    expect(moved.status).toBe(200);
    const done = async (id: string) =>
      eventually(
        async () => {
          const j = (await api(b.url, "GET", `/v1/jobs/${id}`)).body;
          return j.status === "succeeded" ? j : undefined;
        },
        45_000,
        `job ${id} to succeed in region b`,
      );
    const plainJob = await done(plain);
    const verifiedJob = await done(verified);
    expect(plainJob.attempt_log[0]).toMatchObject({ outcome: "lost", possibly_delivered: true });
    expect(verifiedJob.attempt_log[0]).toMatchObject({ outcome: "lost", possibly_delivered: true, verified: true });
    expect(verifiedJob.attempt_log).toHaveLength(1);

    const calls = async (id: string) => rsql<{ token: string; headers: Record<string, string>; body: string }[]>`
      SELECT token::text AS token, headers, body FROM calls WHERE webhook_id = ${id} AND kind = 'call' ORDER BY at`;
    const plainCalls = await calls(plain);
    expect(plainCalls).toHaveLength(2);
    // b's call carries a token of the new generation, above every token region a can issue.
    expect(BigInt(plainCalls[0].token)).toBeLessThan(GEN1);
    expect(BigInt(plainCalls[1].token)).toBeGreaterThanOrEqual(GEN1);
    expect(await calls(verified)).toHaveLength(1);

    // Region a's calls arrive again (a delayed duplicate, as sent: same headers and body).
    const replay = (c: { headers: Record<string, string>; body: string }) =>
      fetch(`${receiver.url}/hook`, { method: "POST", headers: c.headers, body: c.body });
    const stale = await replay(plainCalls[0]);
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe("stale_fencing_token");
    // The verified job's highest token is still a's own: not stale, answered from the marker.
    const again = await replay((await calls(verified))[0]);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ done: verified });

    expect(await effects(plain)).toBe(1);
    expect(await effects(verified)).toBe(1);
  }, 120_000);
});
