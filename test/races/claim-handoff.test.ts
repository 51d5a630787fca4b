/**
 * Issue 14, hole 6: claimed jobs must not be dropped after a commit.
 *
 * (a) The dispatcher of an `--mode=all` process claims straight into `running` under its
 *     local worker's lease. A step of the same pass that fails after the claim committed
 *     (index settling, reconciliation: forced here by the afterClaim seam) must not strand
 *     those jobs until their lease lapses: they are handed to the worker all the same.
 * (b) The pre-call check (StartAttempts) commits but its reply is lost (the afterStartAttempts
 *     seam throws after the statement answered): the worker cannot know whether it opened the
 *     attempts, so it calls nothing and gives back what it may have opened, by owner and
 *     lease generation, without a try. A `max_attempts: 1` job is then still called once and
 *     succeeds, instead of being reaped as a lost call and dying uncalled. The worker here
 *     is a process of its own (a dispatcher beside it queues the job): in `--mode=all` the
 *     claim is the check, as in (c).
 * (c) In `--mode=all` the dispatcher's claim is also the pre-call check of the jobs the worker
 *     can call at once (ClaimDueIds opens their attempts). Its reply is lost after the commit
 *     (the afterClaimReply seam throws): the jobs it started are found by the attempt ids it
 *     was given and handed back uncalled, without a try; the max_attempts: 1 job is called
 *     once and succeeds.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { jobRow } from "../helpers/jobs.ts";
import { afterAPass, api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`claimed jobs are handed over after a commit (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;
    let target: Target | undefined;

    const others: Runtime[] = [];

    /** A max_attempts: 1 job at `path`, after one lost reply: called once, attempt 1, succeeded, one try. */
    async function calledOnceAfterALostReply(path: string, lost: () => number) {
      const j = (await api(rt!, "POST", "/v1/jobs", { target: { url: `${target!.url}${path}` }, retry: { max_attempts: 1 } })).body;
      const final = await eventually(
        async () => {
          const x = (await api(rt!, "GET", `/v1/jobs/${j.id}`)).body;
          return ["succeeded", "dead"].includes(x.status) ? x : undefined;
        },
        10_000,
        "a terminal state",
      );
      expect(lost()).toBe(1);
      expect(final.status).toBe("succeeded");
      expect(target!.callsTo(path)).toHaveLength(1);
      expect(target!.callsTo(path)[0]!.headers["scheduler-attempt"]).toBe("1");
      expect(final.attempt_log.map((a: { number: number; outcome: string }) => [a.number, a.outcome])).toEqual([[1, "success"]]);
      const row = await jobRow(t!.db, j.id);
      expect([row.calls, row.tries]).toEqual([1, 1]);
    }
    afterEach(async () => {
      await rt?.stop();
      for (const o of others.splice(0)) await o.stop();
      await t?.close();
      target?.stop();
      rt = t = target = undefined;
    });

    test("an error after the dispatch claim committed: the claimed jobs still run at once, not a lease TTL later", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let thrown = 0;
      // A long lease: a job stranded in running would wait 30 s for the reaper.
      rt = await startScheduler(
        t.db,
        { SCHEDULER_LEASE_TTL: "30s" },
        {
          afterClaim: async (jobs) => {
            if (jobs.length === 0) return;
            thrown++;
            throw new Error("test: a step after the claim failed");
          },
        },
      );
      const res = await api(rt, "POST", "/v1/jobs/batch", {
        jobs: Array.from({ length: 5 }, (_, i) => ({ target: { url: `${target!.url}/a/${i}` } })),
      });
      expect(res.status).toBe(200);
      const ids: string[] = res.body.jobs.map((j: { id: string }) => j.id);
      const t0 = Date.now();
      await eventually(() => target!.calls.length >= 5, 3000, "all 5 claimed jobs called");
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(thrown).toBeGreaterThan(0);
      for (const id of ids) {
        const row = await eventually(
          async () => {
            const r = await jobRow(t!.db, id);
            return r.status === "succeeded" ? r : undefined;
          },
          3000,
          `job ${id} succeeded`,
        );
        expect([row.calls, row.tries]).toEqual([1, 1]);
      }
      // Another pass of every loop, its calls made: none of the five is called again.
      await afterAPass([rt]);
      expect(target.calls.length).toBe(5);
    }, 20_000);

    test("a lost StartAttempts reply: nothing is called then, the attempt is given back uncounted, and a max_attempts: 1 job is called once and succeeds", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let lost = 0;
      // A short lease: without the give-back the reaper would soon find the open attempt.
      rt = await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "1s" }, { mode: "api" });
      others.push(await startScheduler(t.db, { SCHEDULER_LEASE_TTL: "1s" }, { mode: "dispatcher" }));
      others.push(
        await startScheduler(
          t.db,
          { SCHEDULER_LEASE_TTL: "1s" },
          {
            mode: "worker",
            afterStartAttempts: async (ids) => {
              if (lost > 0 || ids.length === 0) return;
              lost++;
              // The statement committed: its attempt rows are there, and the client sees an error.
              const [open] = await t!.db.query<{ n: string | number }>(
                "SELECT count(*) AS n FROM attempts WHERE job_id = ANY($1::uuid[]) AND outcome IS NULL",
                [ids],
              );
              expect(Number(open!.n)).toBe(ids.length);
              throw new Error("test: connection lost before the reply");
            },
          },
        ),
      );
      await calledOnceAfterALostReply("/b", () => lost);
    }, 20_000);

    test("a lost reply of a claim that started its jobs (--mode=all): nothing is called then, the attempt is given back uncounted, and a max_attempts: 1 job is called once and succeeds", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      let lost = 0;
      rt = await startScheduler(
        t.db,
        { SCHEDULER_LEASE_TTL: "1s" },
        {
          afterClaimReply: async (jobs) => {
            const started = jobs.filter((j) => j.attempt_id !== null);
            if (lost > 0 || started.length === 0) return;
            lost++;
            // The claim committed: the attempts it opened are there, and the client sees an error.
            const [open] = await t!.db.query<{ n: string | number }>("SELECT count(*) AS n FROM attempts WHERE id = ANY($1::uuid[]) AND outcome IS NULL", [
              started.map((j) => j.attempt_id),
            ]);
            expect(Number(open!.n)).toBe(started.length);
            throw new Error("test: connection lost before the reply");
          },
        },
      );
      await calledOnceAfterALostReply("/c", () => lost);
    }, 20_000);
  });
}
