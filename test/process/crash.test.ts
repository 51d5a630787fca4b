// Real processes, real Postgres: several processes share one database, which the embedded
// PGlite cannot do (one process per data directory), so these run on Postgres only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { api } from "../helpers/scheduler.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { eventually, Target } from "../helpers/target.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";

describe("crashes and stops of real processes (postgres)", () => {
  let url: string;
  const procs: Proc[] = [];
  let apiProc: Proc;
  let dispatcher: Proc;
  const workers: Proc[] = [];
  const target = new Target((r) => (r.path.startsWith("/slow") ? Bun.sleep(1500).then(() => new Response("ok")) : new Response("ok")));
  const env = () => ({ DATABASE_URL: url, SCHEDULER_LEASE_TTL: "2s", SCHEDULER_LEADER_TTL: "2s" });

  beforeAll(async () => {
    url = await createDatabase();
  });
  afterAll(async () => {
    for (const p of procs) kill(p);
    await Promise.all(procs.map((p) => p.exited));
    target.stop();
    await dropDatabase(url);
  });

  test("a worker killed with SIGKILL mid-call: another worker retries and the job ends succeeded exactly once", async () => {
    apiProc = await spawnScheduler(["--mode=api"], env());
    procs.push(apiProc);
    dispatcher = await spawnScheduler(["--mode=dispatcher"], env());
    procs.push(dispatcher);
    const w1 = await spawnScheduler(["--mode=worker"], env());
    procs.push(w1);

    const created = await api(apiProc.url, "POST", "/v1/jobs", {
      target: { url: `${target.url}/slow-kill` },
      idempotency_key: "kill-1",
      retry: { max_attempts: 5, base: "100ms", max: "500ms" },
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    // The first call arrives at the target, from w1 (the only worker).
    await eventually(() => target.callsTo("/slow-kill").length === 1, 10_000, "first call");
    kill(w1, "SIGKILL");
    expect(await w1.exited).not.toBe(0);
    // A second worker comes up; the reaper hands the job back after the lease (2 s) passes.
    const w2 = await spawnScheduler(["--mode=worker"], env());
    procs.push(w2);
    workers.push(w2);
    const final = await eventually(
      async () => {
        const j = (await api(apiProc.url, "GET", `/v1/jobs/${id}`)).body;
        return j.status === "succeeded" ? j : undefined;
      },
      20_000,
      "succeeded",
    );

    const calls = target.callsTo("/slow-kill");
    expect(calls).toHaveLength(2);
    // Same identity on both calls: the target can deduplicate.
    expect(calls[0].headers["webhook-id"]).toBe(id);
    expect(calls[1].headers["webhook-id"]).toBe(id);
    expect(calls[1].headers["idempotency-key"]).toBe("kill-1");
    expect(calls.map((c) => c.headers["scheduler-attempt"])).toEqual(["1", "2"]);
    expect(final.attempt_log.map((a: any) => a.outcome)).toEqual(["lost", "success"]);
    expect(final.attempt_log[0].possibly_delivered).toBe(true);
    expect(final.attempt_log[0].worker).not.toBe(final.attempt_log[1].worker);
    // Exactly once in the job record: one terminal state, and it stays so.
    const db = openPostgres({ url, maxConnections: 1 });
    try {
      const rows = await db.query<any>("SELECT status, finished_at FROM jobs WHERE idempotency_key = 'kill-1'");
      expect(rows).toHaveLength(1);
      expect(rows[0].status).toBe("succeeded");
      await Bun.sleep(2500); // longer than a lease: nothing re-runs it
      expect(target.callsTo("/slow-kill")).toHaveLength(2);
      expect((await db.query<any>("SELECT status FROM jobs WHERE id = $1", [id]))[0].status).toBe("succeeded");
    } finally {
      await db.close();
    }
  });

  test("SIGTERM: the worker stops claiming, finishes its call, records it and exits 0", async () => {
    // The worker left by the previous test must not take this job.
    for (const p of workers.splice(0)) kill(p, "SIGKILL");
    const w = await spawnScheduler(["--mode=worker"], env());
    procs.push(w);
    const apiUrl = apiProc.url;
    const before = target.callsTo("/slow-term").length;
    const created = await api(apiUrl, "POST", "/v1/jobs", { target: { url: `${target.url}/slow-term` } });
    await eventually(() => target.callsTo("/slow-term").length > before, 10_000, "call started");
    w.proc.kill("SIGTERM");
    expect(await w.exited).toBe(0);
    const j = (await api(apiUrl, "GET", `/v1/jobs/${created.body.id}`)).body;
    expect(j.status).toBe("succeeded");
    expect(j.attempt_log).toHaveLength(1);
    expect(w.logs().some((l) => l.msg?.startsWith("graceful stop"))).toBe(true);
  });

  test("a dispatcher killed with SIGKILL: the other takes the coordinator lease and its shards with higher epochs, and dispatch goes on", async () => {
    const d2 = await spawnScheduler(["--mode=dispatcher"], env());
    procs.push(d2);
    const w = await spawnScheduler(["--mode=worker"], env());
    procs.push(w);
    const d1 = dispatcher;
    const firstEpoch = (await d1.waitForLog((l) => l.msg === "became leader")).epoch;
    await d1.waitForLog((l) => l.msg === "shards taken");
    const d1Epochs = d1
      .logs()
      .filter((l) => l.msg === "shards taken")
      .flatMap((l) => l.epochs as number[]);
    const killedAt = d2.logs().length;
    kill(d1, "SIGKILL");
    const taken = await d2.waitForLog((l) => l.msg === "became leader", 15_000);
    expect(taken.epoch).toBeGreaterThan(firstEpoch);
    // Its shards come over too, at epochs above every epoch the killed one held.
    await eventually(
      () =>
        d2
          .logs()
          .slice(killedAt)
          .some((l) => l.msg === "shards taken"),
      15_000,
      "the killed dispatcher's shards taken",
    );
    const newEpochs = d2
      .logs()
      .slice(killedAt)
      .filter((l) => l.msg === "shards taken")
      .flatMap((l) => l.epochs as number[]);
    expect(Math.min(...newEpochs)).toBeGreaterThan(Math.max(...d1Epochs));
    await eventually(
      async () => Object.keys((await api(apiProc.url, "GET", "/v1/cluster")).body.shard_owners).length === 1,
      10_000,
      "one dispatcher holding every shard",
    );
    const res = await api(apiProc.url, "POST", "/v1/jobs/batch", {
      jobs: Array.from({ length: 10 }, (_, i) => ({ target: { url: `${target.url}/after-failover/${i}` } })),
    });
    expect(res.status).toBe(200);
    await eventually(() => target.calls.filter((c) => c.path.startsWith("/after-failover/")).length === 10, 10_000, "delivery after takeover");
    for (const c of target.calls.filter((c) => c.path.startsWith("/after-failover/"))) {
      expect(Number(c.headers["scheduler-fencing-token"])).toBeGreaterThan(Math.max(...d1Epochs));
    }
  });
});
