import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { claimDue, expireDue, reapExpiredLeases } from "../../src/store/dispatch-queries.ts";
import { releaseTestShards, takeShards, tokenOf } from "../helpers/shards.ts";
import { successOf } from "../helpers/completion.ts";
import { claimQueued, completeAttempts, startAttempts } from "../../src/store/worker-queries.ts";
import { seedAuthority } from "../../src/store/authority.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { afterAPass, api, startScheduler, startSplit } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

/** The pre-call check's lease: extended to 10 s, and it must still be live. */
const LEASE = { ttlMs: 10_000, marginMs: 0 };

const done = successOf;

for (const driver of DRIVERS) {
  describe(`races named in the design (${driver})`, () => {
    let t: TestDb;
    const target = new Target((r) =>
      r.path === "/slow"
        ? Bun.sleep(2500).then(() => new Response("ok"))
        : r.path === "/slower"
          ? Bun.sleep(11_000).then(() => new Response("ok"))
          : new Response("ok"),
    );
    beforeAll(async () => {
      t = await freshDb(driver);
      await seedAuthority(t.db, "local");
    });
    afterAll(async () => {
      await t?.close();
      target.stop();
    });

    async function queue(over: Parameters<typeof insertJob>[1] = {}) {
      const job = await insertJob(t.db, { target: { url: `${target.url}/x`, method: "POST", headers: {}, body: null, json: false }, ...over });
      const h = await takeShards(t.db, "disp");
      await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE status IN ('scheduled','queued') AND id <> $1", [job.id]);
      const claimed = await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 });
      expect(claimed.map((c) => c.id)).toEqual([job.id]);
      return job;
    }

    test("late completion after a reclaim is rejected and never overwrites the newer attempt", async () => {
      const job = await queue();
      // Worker A claims and starts a call.
      const [a] = await claimQueued(t.db, { owner: "A", region: "local", limit: 1, leaseTtlMs: 1000 });
      const [aAttempt] = await startAttempts(t.db, "A", "local", [{ id: a.id, gen: a.lease_generation, version: a.version }], LEASE);
      expect(aAttempt.number).toBe(1);
      // A pauses; its lease passes; the reaper gives the job back; B takes it and succeeds.
      await t.db.query("UPDATE jobs SET lease_until = now() - interval '1 s' WHERE id = $1", [job.id]);
      const reaped = await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(reaped.map((r) => [r.id, r.was, r.now_status])).toEqual([[job.id, "running", "scheduled"]]);
      const h = await takeShards(t.db, "disp");
      await claimDue(t.db, { fence: h, limit: 10, token: tokenOf(h), ttlMs: 60_000 });
      const [b] = await claimQueued(t.db, { owner: "B", region: "local", limit: 1, leaseTtlMs: 10_000 });
      expect(b.lease_generation).toBe(a.lease_generation + 1);
      const [bAttempt] = await startAttempts(t.db, "B", "local", [{ id: b.id, gen: b.lease_generation, version: b.version }], LEASE);
      expect(await completeAttempts(t.db, "B", [done({ job_id: b.id, gen: b.lease_generation, attempt_id: bAttempt.attempt_id })])).toHaveLength(1);
      // A finally reports — a failure that would re-queue the job. Rejected.
      const late = await completeAttempts(t.db, "A", [
        done({
          job_id: a.id,
          gen: a.lease_generation,
          attempt_id: aAttempt.attempt_id,
          outcome: "transient",
          http_status: 500,
          error: "HTTP 500",
          next_status: "scheduled",
          next_delay_ms: 1000,
        }),
      ]);
      expect(late).toHaveLength(0);
      const row = await jobRow(t.db, job.id);
      expect(row.status).toBe("succeeded");
      expect(row.lease_owner).toBeNull();
      // The attempt log still tells the truth about A's call: lost to the reaper, then its
      // late report beside that verdict.
      const attempts = await t.db.query<any>("SELECT number, outcome, late_outcome, worker FROM attempts WHERE job_id = $1 ORDER BY number", [job.id]);
      expect(attempts).toEqual([
        { number: 1, outcome: "lost", late_outcome: "transient", worker: "A" },
        { number: 2, outcome: "success", late_outcome: null, worker: "B" },
      ]);
    });

    test("a second completion of the same claim is rejected: one terminal transition", async () => {
      const job = await queue();
      const [a] = await claimQueued(t.db, { owner: "A", region: "local", limit: 1, leaseTtlMs: 10_000 });
      const [att] = await startAttempts(t.db, "A", "local", [{ id: a.id, gen: a.lease_generation, version: a.version }], LEASE);
      const c = done({ job_id: a.id, gen: a.lease_generation, attempt_id: att.attempt_id });
      const [r1, r2] = await Promise.all([
        completeAttempts(t.db, "A", [c]),
        completeAttempts(t.db, "A", [{ ...c, next_status: "scheduled", next_delay_ms: 0 }]),
      ]);
      expect(r1.length + r2.length).toBe(1);
      expect(["succeeded", "scheduled"]).toContain((await jobRow(t.db, job.id)).status);
    });

    test("two workers claiming at once never take the same job", async () => {
      await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE status IN ('scheduled','queued')");
      const h = await takeShards(t.db, "disp");
      for (let i = 0; i < 60; i++) await insertJob(t.db);
      expect(await claimDue(t.db, { fence: h, limit: 100, token: tokenOf(h), ttlMs: 60_000 })).toHaveLength(60);
      const [x, y, z] = await Promise.all(["W1", "W2", "W3"].map((o) => claimQueued(t.db, { owner: o, region: "local", limit: 25, leaseTtlMs: 10_000 })));
      const ids = [...x, ...y, ...z].map((j) => j.id);
      expect(ids).toHaveLength(60);
      expect(new Set(ids).size).toBe(60);
    });

    test("the pre-call check refuses a job whose version moved since the claim", async () => {
      const job = await queue();
      const [a] = await claimQueued(t.db, { owner: "A", region: "local", limit: 1, leaseTtlMs: 10_000 });
      await t.db.query("UPDATE jobs SET version = version + 1 WHERE id = $1", [job.id]);
      expect(await startAttempts(t.db, "A", "local", [{ id: a.id, gen: a.lease_generation, version: a.version }], LEASE)).toHaveLength(0);
    });

    test("a job claimed but never called (worker died before the call) costs no try when reaped", async () => {
      const job = await queue({ max_attempts: 1 });
      const [a] = await claimQueued(t.db, { owner: "A", region: "local", limit: 1, leaseTtlMs: 1000 });
      expect(a.id).toBe(job.id);
      await t.db.query("UPDATE jobs SET lease_until = now() - interval '1 s' WHERE id = $1", [job.id]);
      const reaped = await reapExpiredLeases(t.db, { limit: 10, skewMs: 0 });
      expect(reaped.map((r) => [r.id, r.in_call, r.now_status])).toEqual([[job.id, false, "scheduled"]]);
      const row = await jobRow(t.db, job.id);
      expect([row.status, row.tries, row.calls]).toEqual(["scheduled", 0, 0]);
    });

    test("a job past expires_at while queued is never started, and is expired", async () => {
      const job = await queue({ expires_at: new Date(Date.now() + 60_000) });
      await t.db.query("UPDATE jobs SET expires_at = now() - interval '1 ms' WHERE id = $1", [job.id]);
      expect(await claimQueued(t.db, { owner: "A", region: "local", limit: 10, leaseTtlMs: 1000 })).toHaveLength(0);
      expect((await expireDue(t.db, 10)).map((r) => r.id)).toEqual([job.id]);
      expect((await jobRow(t.db, job.id)).status).toBe("expired");
    });

    test("a success that lands after a cancel request stays succeeded: its effect happened", async () => {
      const job = await queue();
      const [a] = await claimQueued(t.db, { owner: "A", region: "local", limit: 1, leaseTtlMs: 10_000 });
      const [att] = await startAttempts(t.db, "A", "local", [{ id: a.id, gen: a.lease_generation, version: a.version }], LEASE);
      await t.db.query("UPDATE jobs SET cancel_requested = true, version = version + 1 WHERE id = $1", [job.id]);
      expect(await completeAttempts(t.db, "A", [done({ job_id: a.id, gen: a.lease_generation, attempt_id: att.attempt_id })])).toHaveLength(1);
      expect((await jobRow(t.db, job.id)).status).toBe("succeeded");
      // ...while a failure after a cancel request ends cancelled, not retried.
      const other = await queue();
      const [b] = await claimQueued(t.db, { owner: "B", region: "local", limit: 1, leaseTtlMs: 10_000 });
      const [bt] = await startAttempts(t.db, "B", "local", [{ id: b.id, gen: b.lease_generation, version: b.version }], LEASE);
      await t.db.query("UPDATE jobs SET cancel_requested = true WHERE id = $1", [other.id]);
      await completeAttempts(t.db, "B", [
        done({ job_id: b.id, gen: b.lease_generation, attempt_id: bt.attempt_id, outcome: "transient", next_status: "scheduled", next_delay_ms: 10 }),
      ]);
      expect((await jobRow(t.db, other.id)).status).toBe("cancelled");
    });

    describe("through a running scheduler", () => {
      // The store-level tests above held shard 0 by hand: give it back to the schedulers here.
      beforeAll(() => releaseTestShards(t.db));
      test("cancel after the worker claimed, before it called: not called, ends cancelled", async () => {
        let cancelAnswer: number | undefined;
        // Between the worker's claim and its pre-call check: split processes (startSplit).
        const split = await startSplit(
          t.db,
          {},
          {
            beforeStart: async (jobs) => {
              for (const j of jobs)
                if (j.target.url.endsWith("/cancel-race")) cancelAnswer = (await api(split.api, "POST", `/v1/jobs/${j.id}/cancel`, {})).status;
            },
          },
        );
        const rt = split.api;
        try {
          const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/cancel-race` } })).body;
          const final = await eventually(
            async () => {
              const x = (await api(rt!, "GET", `/v1/jobs/${j.id}`)).body;
              return x.status === "cancelled" ? x : undefined;
            },
            30_000,
            "cancelled",
          );
          expect(cancelAnswer).toBe(202); // it was running: cancel requested
          expect(final.attempt_log).toHaveLength(0);
          await afterAPass([split.dispatcher, split.worker]);
          expect(target.callsTo("/cancel-race")).toHaveLength(0);
        } finally {
          await split.stop();
        }
      });

      test("reschedule after the dispatcher queued it: the old dispatch is dropped, it runs at the new time only", async () => {
        const disp = await startScheduler(t.db, {}, { mode: "dispatcher" });
        const apiRt = await startScheduler(t.db, {}, { mode: "api" });
        let worker: Runtime | undefined;
        try {
          const j = (await api(apiRt, "POST", "/v1/jobs", { target: { url: `${target.url}/resched` } })).body;
          await eventually(async () => (await jobRow(t.db, j.id)).status === "queued", 30_000, "queued");
          const moved = await api(apiRt, "PATCH", `/v1/jobs/${j.id}`, { delay: "1500ms", if_version: 1 });
          expect(moved.status).toBe(200);
          expect(moved.body).toMatchObject({ status: "scheduled", version: 2 });
          worker = await startScheduler(t.db, {}, { mode: "worker" });
          // The new worker and the dispatcher have each looked once: the stale dispatch is not called.
          await afterAPass([disp, worker]);
          expect(target.callsTo("/resched")).toHaveLength(0);
          await target.waitForCalls(target.calls.length + 1, 30_000);
          const call = target.callsTo("/resched");
          expect(call).toHaveLength(1);
          expect(call[0].at).toBeGreaterThanOrEqual(Date.parse(moved.body.due_at));
          const audit = await t.db.query<any>("SELECT actor, action, object_id FROM audit_log WHERE object_id = $1", [j.id]);
          expect(audit).toEqual([{ actor: "local", action: "job.rescheduled", object_id: j.id }]);
        } finally {
          await worker?.stop();
          await apiRt.stop();
          await disp.stop();
        }
      });

      test("a call longer than the lease TTL keeps its lease by renewal and is not retried", async () => {
        // An 8 s lease under an 11 s call: renewed about every 2.7 s, four times. The renewer
        // must get an answer within a quarter of the lease (it then retries; the watchdog
        // aborts the call once the lease may have lapsed): with a 1 s lease (250 ms) or 2 s
        // (500 ms), PGlite on a loaded machine (its queries run on the process's own thread)
        // answered too late, the calls were aborted and the job retried, 5 attempts instead of
        // 1; with 5 s (1.25 s) once, the machine three times overloaded (2 attempts).
        const rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "8s" });
        try {
          const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/slower` }, timeout: "30s" })).body;
          const final = await eventually(
            async () => {
              const x = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
              return x.status === "succeeded" ? x : undefined;
            },
            45_000,
            "succeeded",
          );
          expect(final.attempt_log).toHaveLength(1);
          expect(target.callsTo("/slower")).toHaveLength(1);
        } finally {
          await rt.stop();
        }
      });

      test("cancel of a running job: 202, the call is aborted at once, the job ends cancelled", async () => {
        // A 30 s lease is renewed every 10 s: the renewal, which also sees the cancel flag,
        // cannot be what ends this call, so the bound below checks the NOTIFY wake-up alone
        // (with the helpers' 3 s lease, a renewal 1 s after the claim could, 978 ms seen).
        const rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "30s" });
        try {
          const before = target.callsTo("/slow").length;
          const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/slow` }, timeout: "10s" })).body;
          await eventually(() => target.callsTo("/slow").length > before, 30_000, "call started");
          const t0 = Date.now();
          const c = await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {});
          expect(c.status).toBe(202);
          expect(c.body.cancel_requested).toBe(true);
          const final = await eventually(
            async () => {
              const x = (await api(rt, "GET", `/v1/jobs/${j.id}`)).body;
              return x.status === "cancelled" ? x : undefined;
            },
            30_000,
            "cancelled",
          );
          // Well before the target would have answered (2.5 s from the call) or the lease
          // renewal (10 s): on a loaded 2-core box the wake-up, abort and commit took 978 ms.
          expect(Date.now() - t0).toBeLessThan(2000);
          expect(final.attempt_log).toHaveLength(1);
          expect(final.attempt_log[0].error).toContain("cancel requested");
          expect((await api(rt, "POST", `/v1/jobs/${j.id}/cancel`, {})).status).toBe(409);
          const audit = await t.db.query<any>("SELECT action FROM audit_log WHERE object_id = $1", [j.id]);
          expect(audit.map((a) => a.action)).toEqual(["job.cancel_requested"]);
        } finally {
          await rt.stop();
        }
      });

      test("a stop that runs out of grace aborts the call without using up a try", async () => {
        const rt = await startScheduler(t.db, { SCHEDULER_SHUTDOWN_GRACE: "200ms" });
        const before = target.callsTo("/slow").length;
        const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/slow` }, timeout: "10s", retry: { max_attempts: 1 } })).body;
        await eventually(() => target.callsTo("/slow").length > before, 30_000, "call started");
        await rt.stop();
        const row = await jobRow(t.db, j.id);
        expect([row.status, row.tries, row.calls]).toEqual(["scheduled", 0, 1]);
        const [a] = await t.db.query<any>("SELECT outcome, possibly_delivered FROM attempts WHERE job_id = $1", [j.id]);
        expect(a).toEqual({ outcome: "unknown", possibly_delivered: true });
        await t.db.query("UPDATE jobs SET status = 'cancelled' WHERE id = $1", [j.id]);
      });

      test("graceful stop waits for the call in flight and records its outcome", async () => {
        const rt = await startScheduler(t.db, {});
        const before = target.callsTo("/slow").length;
        const j = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/slow` }, timeout: "10s" })).body;
        await eventually(() => target.callsTo("/slow").length > before, 30_000, "call started");
        await rt.stop();
        const row = await jobRow(t.db, j.id);
        expect(row.status).toBe("succeeded");
        expect(row.lease_owner).toBeNull();
      });
    });
  });
}
