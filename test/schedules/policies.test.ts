// Misfire, overlap, window and pause/resume through real in-process schedulers and a loopback
// target, on both drivers. Each group runs its schedules side by side in one scenario (set up
// in beforeAll) and the tests then check what the target and the database saw.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, type Received } from "../helpers/target.ts";
import { apiJobs, createSchedule, dbJobs, getSchedule, isCatchup, iso, metric, nominalOf, nominals, Recorder, type JobLite } from "./gen-support.ts";

const EVERY_2S = "*/2 * * * * *"; // default grace 1 s
// The misfire scenario's every-2-s rules: the first pass after the downtime must find the last
// nominal on time. With the default 1 s, a dispatcher that took over 850 ms to start and
// generate (PGlite, four test files at once) found none on time.
const GRACE_2S_MS = 1800;
const EVERY_S = "* * * * * *"; // default grace 500 ms

for (const driver of DRIVERS) {
  describe(`schedule policies through real schedulers (${driver})`, () => {
    let t: TestDb;
    const rec = new Recorder(2500);
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(async () => {
      await t?.close();
      rec.stop();
    });

    describe("misfire after downtime (nothing generating for ~6 s, then a dispatcher starts)", () => {
      const ids = { skip: `mf-skip-${driver}`, once: `mf-once-${driver}`, all: `mf-all-${driver}`, allSkip: `mf-all-skip-${driver}` };
      const first: Record<string, number> = {};
      let tStart = 0;
      let gen = 0; // the database's now() in the first generation pass
      const calls: Record<string, Received[]> = {};
      const jobs: Record<string, JobLite[]> = {};
      const schedules: Record<string, any> = {};
      let misfiredMetric = 0;
      let jobsBeforeStart = -1;
      let callsBeforeStart = -1;

      beforeAll(async () => {
        const apiRt = await startScheduler(t.db, {}, { mode: "api" });
        let rt: Runtime | undefined;
        try {
          const tgt = (p: string) => ({ url: `${rec.url}/${p}` });
          for (const [k, body] of [
            ["skip", { id: ids.skip, cron: EVERY_2S, misfire: "skip", misfire_grace: `${GRACE_2S_MS}ms`, target: tgt(ids.skip) }],
            ["once", { id: ids.once, cron: EVERY_2S, misfire: "fire_once", misfire_grace: `${GRACE_2S_MS}ms`, target: tgt(ids.once) }],
            // overlap allow: catch-up runs are not held back by the overlap policy.
            ["all", { id: ids.all, cron: EVERY_S, misfire: "fire_all", catchup_window: "3s", overlap: "allow", target: tgt(ids.all) }],
            // the default overlap (skip)
            ["allSkip", { id: ids.allSkip, cron: EVERY_S, misfire: "fire_all", catchup_window: "3s", target: tgt(ids.allSkip) }],
          ] as const) {
            const s = await createSchedule(apiRt, body);
            first[k] = Date.parse(s.next_fire_at);
          }
          // Several fire times pass with no dispatcher anywhere.
          await Bun.sleep(6000);
          // Start ~150 ms after an even second: the last nominal of every rule is then on
          // time (within grace), the ones before it missed.
          await Bun.sleep(2000 - (Date.now() % 2000) + 150);
          jobsBeforeStart = Number((await t.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n);
          callsBeforeStart = rec.target.calls.length;
          tStart = Date.now();
          rt = await startScheduler(t.db, { SCHEDULER_CATCHUP_RATE: "5" }, { mode: "all" });
          await Bun.sleep(4000);
          for (const [k, id] of Object.entries(ids)) {
            calls[k] = [...rec.calls(`/${id}`)];
            jobs[k] = await dbJobs(t.db, id);
            schedules[k] = await getSchedule(rt, id);
          }
          misfiredMetric = await metric(rt, "scheduler_occurrences_total", 'result="misfired"');
          gen = Math.min(
            ...Object.values(jobs)
              .flat()
              .map((j) => j.created),
          );
          for (const id of Object.values(ids)) await api(rt, "DELETE", `/v1/schedules/${id}`);
        } finally {
          await rt?.stop();
          await apiRt.stop();
        }
      });

      /** The rule's nominals from the first one up to the first pass, split by how late they were then. */
      function missedAt(cron: string, k: string, graceMs: number, windowMs = Infinity) {
        const ns = nominals(cron, first[k], gen);
        return {
          tooOld: ns.filter((n) => gen - n > windowMs),
          missed: ns.filter((n) => gen - n > graceMs && gen - n <= windowMs),
          onTime: ns.filter((n) => gen - n <= graceMs),
        };
      }

      const describeJobs = (js: JobLite[]) => js.map((j) => `${iso(j.nominal)} ${j.status}${j.catchup ? " catchup" : ""}`);

      /**
       * The nominals whose occurrence ran its course: called, or never called and expired past
       * its start_by. On a machine too busy to start a job within its grace (PGlite, with four
       * test files at once) the scheduler must expire it uncalled: the policy's choice is in
       * the jobs it created either way, and a job past its grace is never called late.
       */
      const ranOrExpired = (k: string): number[] =>
        [...new Set([...calls[k]!.map(nominalOf), ...jobs[k]!.filter((j) => j.status === "expired" && j.calls === 0).map((j) => j.nominal)])].sort(
          (a, b) => a - b,
        );

      test("nothing was generated or called while no dispatcher ran", () => {
        expect(jobsBeforeStart).toBe(0);
        expect(callsBeforeStart).toBe(0);
        expect(gen).toBeGreaterThanOrEqual(tStart - 50);
        expect(gen - first.once).toBeGreaterThan(5000);
      });

      test("skip: no call and no job for the missed nominals; the next call is the next on-time one; misfired counted", () => {
        const { missed, onTime } = missedAt(EVERY_2S, "skip", GRACE_2S_MS);
        expect(missed.length).toBeGreaterThanOrEqual(2);
        expect(onTime).toHaveLength(1);
        const missedSet = new Set(missed);
        expect(calls.skip.filter((c) => missedSet.has(nominalOf(c))).map((c) => c.headers["scheduler-nominal-time"])).toEqual([]);
        expect(jobs.skip.filter((j) => missedSet.has(j.nominal)).map((j) => iso(j.nominal))).toEqual([]);
        // The first occurrence after the missed ones is the on-time one (called, or expired
        // uncalled on a starved machine: see ranOrExpired).
        expect(calls.skip.length).toBeGreaterThanOrEqual(2);
        expect(iso(ranOrExpired("skip")[0]!)).toBe(iso(onTime[0]));
        expect(calls.skip.filter(isCatchup)).toHaveLength(0);
        expect(schedules.skip.occurrences.misfired).toBeGreaterThanOrEqual(missed.length);
        expect(misfiredMetric).toBeGreaterThan(0);
      });

      test("fire_once: exactly one call for the missed nominals — the most recent, as catch-up, with its own nominal time", () => {
        const { missed } = missedAt(EVERY_2S, "once", GRACE_2S_MS);
        expect(missed.length).toBeGreaterThanOrEqual(2);
        const missedSet = new Set(missed);
        const forMissed = calls.once.filter((c) => missedSet.has(nominalOf(c)));
        expect(forMissed.map((c) => c.headers["scheduler-nominal-time"])).toEqual([iso(missed.at(-1)!)]);
        const c = forMissed[0];
        expect(isCatchup(c)).toBe(true);
        expect(c.headers["idempotency-key"]).toBe(`${ids.once}@${iso(missed.at(-1)!)}`);
        expect(c.at).toBeGreaterThanOrEqual(tStart);
        // The older missed ones have no job at all (coalesced, never created).
        expect(jobs.once.filter((j) => j.nominal < missed.at(-1)!).map((j) => iso(j.nominal))).toEqual([]);
        expect(schedules.once.occurrences.misfired).toBeGreaterThanOrEqual(missed.length - 1);
        expect(schedules.once.occurrences.misfired).toBeGreaterThan(0);
        // Later calls are on time: none flagged catch-up unless it really started past its grace.
        for (const x of calls.once.filter((x) => nominalOf(x) > missed.at(-1)!)) if (isCatchup(x)) expect(x.at - nominalOf(x)).toBeGreaterThan(GRACE_2S_MS);
      });

      test("fire_once: the on-time occurrences after the catch-up all run (the catch-up does not crowd out an on-time one)", () => {
        // The first pass sees the missed ones and one on time (~150 ms late, grace 1.8 s). The
        // on-time one must run as it would under skip; the catch-up has not even started, so
        // the overlap policy (default skip) has nothing "still running" to skip it for.
        const { missed, onTime } = missedAt(EVERY_2S, "once", GRACE_2S_MS);
        expect(onTime).toHaveLength(1);
        const later = ranOrExpired("once").filter((n) => n > missed.at(-1)!);
        const lastCalled = Math.max(...calls.once.map(nominalOf));
        const ran = new Set(later.filter((n) => n <= lastCalled));
        // The on-time one of the catch-up's pass ran: the catch-up did not crowd it out.
        expect(iso(Math.min(...ran))).toBe(iso(onTime[0]!));
        // Every later one ran too, unless skipped for overlap and counted so (default skip: on
        // a starved machine the one before it can still be running when it is due; one later
        // occurrence missing was seen once, the machine three times overloaded, before this
        // count was checked). None is lost without a count.
        const notRun = nominals(EVERY_2S, onTime[0], lastCalled).filter((n) => !ran.has(n));
        expect({ notRun: notRun.length, jobs: describeJobs(jobs.once) }).toEqual({
          notRun: schedules.once.occurrences.skipped,
          jobs: describeJobs(jobs.once),
        });
      });

      test("fire_all: one catch-up call per missed nominal within catchup_window (3 s), none older", () => {
        const { tooOld, missed } = missedAt(EVERY_S, "all", 500, 3000);
        expect(tooOld.length).toBeGreaterThanOrEqual(1);
        expect(missed.length).toBeGreaterThanOrEqual(2);
        const callsFor = (n: number) => calls.all.filter((c) => nominalOf(c) === n);
        // One catch-up occurrence each, called once (or expired uncalled: see ranOrExpired).
        const ran = new Set(ranOrExpired("all"));
        const jobFor = (n: number) => jobs.all.find((j) => j.nominal === n);
        expect(missed.map((n) => [iso(n), ran.has(n), callsFor(n).length <= 1, jobFor(n)?.catchup, callsFor(n).every(isCatchup)])).toEqual(
          missed.map((n) => [iso(n), true, true, true, true]),
        );
        // Nothing older than the window: no call, no job.
        expect(calls.all.filter((c) => gen - nominalOf(c) > 3000).map((c) => c.headers["scheduler-nominal-time"])).toEqual([]);
        expect(jobs.all.filter((j) => gen - j.nominal > 3000).map((j) => iso(j.nominal))).toEqual([]);
        // A call flagged catch-up that was not missed at generation really started past its grace.
        const missedSet = new Set(missed);
        for (const c of calls.all.filter(isCatchup)) if (!missedSet.has(nominalOf(c))) expect(c.at - nominalOf(c)).toBeGreaterThan(500);
        // Every nominal from the oldest in the window on has run its course, with at most one call.
        const lastCalled = Math.max(...calls.all.map(nominalOf));
        expect(new Set(calls.all.map(nominalOf)).size).toBe(calls.all.length);
        expect(
          ranOrExpired("all")
            .filter((n) => n <= lastCalled)
            .map(iso),
        ).toEqual(nominals(EVERY_S, missed[0], lastCalled).map(iso));
        expect(schedules.all.occurrences.misfired).toBeGreaterThanOrEqual(tooOld.length);
      });

      test("fire_all with the default overlap (skip): every missed occurrence within the window still runs", () => {
        // A catch-up occurrence created in the same pass has not started: it is not "still
        // running" when the next one comes due, so overlap=skip must not drop the others.
        const { missed } = missedAt(EVERY_S, "allSkip", 500, 3000);
        expect(missed.length).toBeGreaterThanOrEqual(2);
        const called = new Set(ranOrExpired("allSkip"));
        expect({ missedCalled: missed.filter((n) => called.has(n)).map(iso), jobs: describeJobs(jobs.allSkip) }).toEqual({
          missedCalled: missed.map(iso),
          jobs: describeJobs(jobs.allSkip),
        });
      });

      test("catch-up calls are spread at SCHEDULER_CATCHUP_RATE (5/s), never before their nominal time", () => {
        const every = Object.values(calls).flat();
        const catchups = every.filter((c) => isCatchup(c) && nominalOf(c) < gen - 500).sort((a, b) => a.at - b.at);
        expect(catchups.length).toBeGreaterThanOrEqual(3);
        // 5/s: due 200 ms apart (exactly), each called no sooner than due. Arrivals carry
        // scheduling jitter (one late call shortens the gap to the next), so the rate is
        // checked over windows: never more than 5 (+1 at a window's edge) in any second, among
        // the calls that came on time. A call that came late (a starved CPU: four test files
        // at once) is followed at once by the next one due, which is the point of a backlog. The
        // rate itself is the spacing of the due times, checked next.
        const onTime = catchups.filter((c) => c.at - Date.parse(c.headers["scheduler-scheduled-for"]) <= 150);
        for (const c of onTime) {
          expect(onTime.filter((d) => d.at >= c.at && d.at < c.at + 1000).length).toBeLessThanOrEqual(6);
        }
        const due = catchups.map((c) => Date.parse(c.headers["scheduler-scheduled-for"])).sort((a, b) => a - b);
        for (let i = 1; i < due.length; i++) expect(due[i] - due[i - 1]).toBeGreaterThanOrEqual(199);
        for (const c of every) {
          expect(c.at).toBeGreaterThanOrEqual(nominalOf(c));
          expect(c.at).toBeGreaterThanOrEqual(Date.parse(c.headers["scheduler-scheduled-for"]));
        }
      });

      test("occurrence identity: distinct nominal times, key <id>@<nominal ISO>, one call per key", () => {
        for (const [k, id] of Object.entries(ids)) {
          const js = jobs[k];
          expect(new Set(js.map((j) => j.nominal)).size).toBe(js.length);
          for (const j of js) expect(j.idempotency_key).toBe(`${id}@${iso(j.nominal)}`);
          const keys = calls[k].map((c) => c.headers["idempotency-key"]);
          expect(new Set(keys).size).toBe(keys.length);
          for (const c of calls[k]) expect(c.headers["idempotency-key"]).toBe(`${id}@${c.headers["scheduler-nominal-time"]}`);
        }
      });
    });

    describe("overlap, window and pause/resume under a running scheduler", () => {
      const ids = {
        allow: `ov-allow-${driver}`,
        skip: `ov-skip-${driver}`,
        queue: `ov-queue-${driver}`,
        window: `win-${driver}`,
        windowSkip: `win-skip-${driver}`,
        pause: `pause-${driver}`,
      };
      const paths: Record<string, string> = {
        allow: `/slow-${ids.allow}`,
        skip: `/slow-${ids.skip}`,
        queue: `/slow-${ids.queue}`,
        window: `/${ids.window}`,
        windowSkip: `/${ids.windowSkip}`,
        pause: `/${ids.pause}`,
      };
      const calls: Record<string, Received[]> = {};
      const jobs: Record<string, JobLite[]> = {};
      const apiJobsOf: Record<string, any[]> = {};
      const schedules: Record<string, any> = {};
      const skippedMetric = { before: 0, after: 0 };
      const held = { max: 0, seenWaiting: 0, polls: 0 };
      const pause = {
        firstCallSeen: 0,
        pausedAnswer: undefined as any,
        tPaused: 0,
        tResume: 0,
        callsWhilePaused: [] as Received[],
        jobsWhilePaused: [] as JobLite[],
        misfiredBefore: 0,
      };
      let duplicateOccurrences: unknown[] = [];

      beforeAll(async () => {
        const rt = await startScheduler(t.db, {}, { mode: "all" });
        try {
          skippedMetric.before = await metric(rt, "scheduler_occurrences_total", 'result="skipped_overlap"');
          const tgt = (k: string) => ({ url: `${rec.url}${paths[k]}` });
          await createSchedule(rt, { id: ids.allow, cron: EVERY_S, overlap: "allow", target: tgt("allow") });
          await createSchedule(rt, { id: ids.skip, cron: EVERY_S, overlap: "skip", target: tgt("skip") });
          await createSchedule(rt, { id: ids.queue, cron: EVERY_S, overlap: "queue", max_queued: 1, target: tgt("queue") });
          // Per second, grace 1.5 s: five in eight window offsets (uniform in 0..4 s) exceed it.
          // The calls made in the run (14-17 measured over both schedules) all stay below it
          // with odds of (3/8)^n: ~1 in 2.5 million at 15, ~1 in 18,000 if a slow run made only
          // 10. With a 2 s window a quarter did, and a CI run once drew none
          // of 1 in 4 over ~16 calls (odds ~1 in 100). Not the default 500 ms grace: PGlite runs
          // on the test process's thread, and in the full suite it started a job ~0.9 s after its
          // due instant, a misfire by the rules, not the window's fault.
          await createSchedule(rt, { id: ids.window, cron: EVERY_S, window: "4s", misfire_grace: "1500ms", overlap: "allow", target: tgt("window") });
          await createSchedule(rt, {
            id: ids.windowSkip,
            cron: EVERY_S,
            window: "4s",
            misfire_grace: "1500ms",
            overlap: "allow",
            misfire: "skip",
            target: tgt("windowSkip"),
          });
          await createSchedule(rt, { id: ids.pause, cron: EVERY_2S, misfire: "fire_once", target: tgt("pause") });
          const started = Date.now();
          let polling = true;
          const poller = (async () => {
            while (polling) {
              const items = await apiJobs(rt, ids.queue);
              const waiting = items.filter((j) => j.waiting_for_previous === true).length;
              held.max = Math.max(held.max, waiting);
              if (waiting > 0) held.seenWaiting++;
              held.polls++;
              await Bun.sleep(150);
            }
          })();
          const pauser = (async () => {
            await eventually(() => rec.calls(paths.pause).length > 0, 5000, "a first call of the schedule to pause");
            pause.firstCallSeen = Date.now();
            const res = await api(rt, "POST", `/v1/schedules/${ids.pause}/pause`, { reason: "test" });
            pause.pausedAnswer = res.body;
            pause.tPaused = Date.now();
            pause.misfiredBefore = res.body.occurrences.misfired;
            await Bun.sleep(5000);
            pause.callsWhilePaused = rec.calls(paths.pause).filter((c) => c.at > pause.tPaused + 300);
            pause.jobsWhilePaused = (await dbJobs(t.db, ids.pause)).filter((j) => j.nominal > pause.tPaused);
            pause.tResume = Date.now();
            const r = await api(rt, "POST", `/v1/schedules/${ids.pause}/resume`, {});
            expect(r.status).toBe(200);
            await Bun.sleep(3000);
          })();
          try {
            await pauser;
            await Bun.sleep(Math.max(0, 9000 - (Date.now() - started)));
          } finally {
            polling = false;
            await poller;
          }
          for (const [k, id] of Object.entries(ids)) {
            calls[k] = [...rec.calls(paths[k])];
            jobs[k] = await dbJobs(t.db, id);
            apiJobsOf[k] = await apiJobs(rt, id);
            schedules[k] = await getSchedule(rt, id);
          }
          skippedMetric.after = await metric(rt, "scheduler_occurrences_total", 'result="skipped_overlap"');
          duplicateOccurrences = await t.db.query(
            "SELECT schedule_id, nominal_time, count(*) AS n FROM jobs WHERE schedule_id IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1",
          );
          for (const id of Object.values(ids)) await api(rt, "DELETE", `/v1/schedules/${id}`);
        } finally {
          await rt.stop();
        }
      });

      test("overlap allow: occurrences of a slow target overlap (≥ 2 calls in flight at once)", () => {
        expect(calls.allow.length).toBeGreaterThanOrEqual(5);
        expect(rec.maxInflight.get(paths.allow)).toBeGreaterThanOrEqual(2);
        expect(schedules.allow.occurrences.skipped).toBe(0);
      });

      test("overlap skip: never two in flight; the skips are recorded on the schedule and in metrics", () => {
        expect(calls.skip.length).toBeGreaterThanOrEqual(2);
        expect(rec.maxInflight.get(paths.skip)).toBe(1);
        // Each call starts after the one before it answered.
        const cs = [...calls.skip].sort((a, b) => a.at - b.at);
        for (let i = 1; i < cs.length; i++) expect(cs[i].at).toBeGreaterThanOrEqual(rec.done.get(cs[i - 1]) ?? Infinity);
        expect(schedules.skip.occurrences.skipped).toBeGreaterThan(0);
        expect(schedules.skip.last_skip_reason).toContain("overlap");
        expect(schedules.skip.last_skip_at).not.toBeNull();
        expect(skippedMetric.after).toBeGreaterThan(skippedMetric.before);
        // Skipped occurrences leave no job behind: every job was started (but perhaps the
        // newest), and every started job was called. The scheduler ran on while the calls and
        // then the jobs were read, so a job may have started in between: its call is looked
        // for among those the target saw by now (the runtime has stopped, its calls drained).
        const started = new Set(jobs.skip.filter((j) => j.calls > 0).map((j) => j.nominal));
        expect(calls.skip.map(nominalOf).filter((n) => !started.has(n))).toEqual([]);
        const arrived = new Set(rec.calls(paths.skip).map(nominalOf));
        expect([...started].filter((n) => !arrived.has(n))).toEqual([]);
        expect(jobs.skip.length).toBeLessThanOrEqual(started.size + 1);
      });

      test("overlap queue (max_queued 1): never two in flight; the held one starts right after; at most one waiting; the rest skipped", () => {
        const cs = [...calls.queue].sort((a, b) => a.at - b.at);
        expect(cs.length).toBeGreaterThanOrEqual(3);
        expect(rec.maxInflight.get(paths.queue)).toBe(1);
        const gaps: number[] = [];
        for (let i = 1; i < cs.length; i++) {
          const prevDone = rec.done.get(cs[i - 1]);
          if (prevDone === undefined) continue;
          expect(cs[i].at).toBeGreaterThanOrEqual(prevDone);
          if (nominalOf(cs[i]) < prevDone) gaps.push(cs[i].at - prevDone); // it was waiting
        }
        expect(gaps.length).toBeGreaterThanOrEqual(2);
        // Started by the release's wake-up, not by a later poll (1 s apart): alone, the gaps are
        // 10-35 ms on both drivers. PGlite runs on the test process's thread, and in the full
        // suite one gap in a run was 521, 593 or 1111 ms (a starved thread), so the median is
        // held to the wake-up and each gap only to two polls. With the machine three times
        // overloaded PGlite's median reached 572 ms, and in one full suite on a slow VM 1,255:
        // there it is held to a poll and a half only, which says less; PostgreSQL's run, the
        // same release path, holds the wake-up's bound.
        const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!;
        expect(median).toBeLessThan(driver === "pglite" ? 1500 : 500);
        for (const g of gaps) expect(g).toBeLessThan(2000);
        // Run in nominal order.
        expect(cs.map(nominalOf)).toEqual([...cs.map(nominalOf)].sort((a, b) => a - b));
        expect(held.polls).toBeGreaterThan(10);
        expect(held.seenWaiting).toBeGreaterThan(0);
        expect(held.max).toBeLessThanOrEqual(1);
        expect(schedules.queue.occurrences.skipped).toBeGreaterThan(0);
      });

      test("window 4s: every call at or after its nominal time and no later than nominal + window (+ slack)", () => {
        expect(calls.window.length).toBeGreaterThanOrEqual(3);
        for (const k of ["window", "windowSkip"]) {
          for (const c of calls[k]) {
            const n = nominalOf(c);
            const due = Date.parse(c.headers["scheduler-scheduled-for"]);
            expect(c.at).toBeGreaterThanOrEqual(n);
            // Up to the grace after its due instant: later would be a catch-up or a misfire.
            expect(c.at).toBeLessThanOrEqual(n + 4000 + 1500);
            expect(due).toBeGreaterThanOrEqual(n);
            expect(due).toBeLessThanOrEqual(n + 4000);
            expect(c.at).toBeGreaterThanOrEqual(due);
          }
        }
        // The window really spreads the runs (every offset 0 has odds of 1 in 4001 per call),
        // and some offsets go past the grace, so the two tests below look at such runs.
        expect(calls.window.some((c) => Date.parse(c.headers["scheduler-scheduled-for"]) > nominalOf(c))).toBe(true);
        const offsets = [...calls.window, ...calls.windowSkip].map((c) => Date.parse(c.headers["scheduler-scheduled-for"]) - nominalOf(c));
        expect(Math.max(...offsets)).toBeGreaterThan(1500);
      });

      test("window 4s: a run spread later by its window is on time, not a catch-up", () => {
        // Scheduler-Catchup marks runs late by misfire policy; a window offset beyond the grace
        // (1.5 s here) is the schedule's own jitter. The grace counts from the run's own instant
        // (scheduled-for, the window applied): a run flagged must have been claimed more than the
        // grace after it, so it arrived later still. A loaded box can make a run that late for
        // real (PGlite shares the test's thread: one in a full suite on a slow VM, offset 1 ms);
        // counting the grace from the nominal time instead flags runs that arrive on time.
        const wronglyFlagged = [...calls.window, ...calls.windowSkip]
          .filter((c) => isCatchup(c) && c.at - Date.parse(c.headers["scheduler-scheduled-for"]) <= 1500)
          .map(
            (c) =>
              `${c.path} nominal ${c.headers["scheduler-nominal-time"]} scheduled-for ${c.headers["scheduler-scheduled-for"]} arrived ${new Date(c.at).toISOString()}`,
          );
        expect(wronglyFlagged).toEqual([]);
      });

      test("window 4s with misfire skip: no occurrence is expired as misfired for its window offset", () => {
        // Every occurrence generated on time must run: its window offset is not lateness.
        expect(calls.windowSkip.length).toBeGreaterThanOrEqual(1);
        const expired = jobs.windowSkip
          .filter((j) => j.status === "expired")
          .map((j) => `${iso(j.nominal)} due +${j.scheduled_for - j.nominal} ms: ${j.dead_reason}`);
        expect(expired).toEqual([]);
        // Every nominal second got its occurrence...
        const generated = jobs.windowSkip.map((j) => j.nominal).sort((a, b) => a - b);
        expect(generated.map(iso)).toEqual(nominals(EVERY_S, generated[0]!, generated.at(-1)!).map(iso));
        // ...and each one due well before the last call arrived was called once. Not "every
        // nominal before the last one called": a window offset can put second n after n + 1.
        const called = calls.windowSkip.map(nominalOf);
        expect(new Set(called).size).toBe(called.length);
        const lastAt = Math.max(...calls.windowSkip.map((c) => c.at));
        const uncalled = jobs.windowSkip
          .filter((j) => j.scheduled_for <= lastAt - 1000 && !called.includes(j.nominal))
          .map((j) => `${iso(j.nominal)} due ${iso(j.scheduled_for)}: ${j.status}`);
        expect(uncalled).toEqual([]);
        expect(schedules.windowSkip.occurrences.misfired).toBe(0);
      });

      test("pause: a paused schedule generates nothing; resume applies fire_once to what was missed (one catch-up)", () => {
        expect(pause.pausedAnswer.paused).toBe(true);
        expect(pause.callsWhilePaused.map((c) => c.headers["scheduler-nominal-time"])).toEqual([]);
        expect(pause.jobsWhilePaused.map((j) => iso(j.nominal))).toEqual([]);
        // What the pause missed: nominals after the pause, later than grace (1 s) at the first pass after resume.
        const catchupJob = jobs.pause.find((j) => j.nominal > pause.tPaused && j.nominal < pause.tResume);
        expect(catchupJob).toBeDefined();
        const genR = catchupJob!.created;
        expect(genR).toBeGreaterThanOrEqual(pause.tResume - 50);
        const missed = nominals(EVERY_2S, pause.tPaused + 1, genR - 1001);
        expect(missed.length).toBeGreaterThanOrEqual(2);
        const missedSet = new Set(missed);
        const forMissed = calls.pause.filter((c) => missedSet.has(nominalOf(c)));
        expect(forMissed.map((c) => [c.headers["scheduler-nominal-time"], c.headers["scheduler-catchup"]])).toEqual([[iso(missed.at(-1)!), "true"]]);
        expect(forMissed[0].at).toBeGreaterThanOrEqual(pause.tResume);
        // No job for the others (coalesced), and generation goes on after the catch-up.
        expect(jobs.pause.filter((j) => missedSet.has(j.nominal)).map((j) => iso(j.nominal))).toEqual([iso(missed.at(-1)!)]);
        expect(calls.pause.some((c) => nominalOf(c) > genR)).toBe(true);
        expect(schedules.pause.occurrences.misfired - pause.misfiredBefore).toBeGreaterThanOrEqual(missed.length - 1);
        expect(schedules.pause.paused).toBe(false);
      });

      test("occurrence identity: one job per nominal time, idempotency key <id>@<nominal ISO>, as the target saw it", () => {
        expect(duplicateOccurrences).toEqual([]);
        for (const [k, id] of Object.entries(ids)) {
          const items = apiJobsOf[k];
          expect(items.length).toBeGreaterThan(0);
          expect(new Set(items.map((j) => j.nominal_time)).size).toBe(items.length);
          for (const j of items) {
            expect(j.schedule_id).toBe(id);
            expect(j.idempotency_key).toBe(`${id}@${j.nominal_time}`);
          }
          const byId = new Map(items.map((j) => [j.id, j]));
          for (const c of calls[k]) {
            const j = byId.get(c.headers["webhook-id"]);
            expect(j).toBeDefined();
            expect(c.headers["idempotency-key"]).toBe(j.idempotency_key);
            expect(c.headers["scheduler-nominal-time"]).toBe(j.nominal_time);
          }
        }
      });
    });

    describe("an occurrence job that exists but cannot start within its grace (no worker) ends expired, reason misfire", () => {
      const id = `exp-${driver}`;
      let before: JobLite[] = [];
      let snapshotAt = 0;
      let misfiredMetric = 0;
      let after: JobLite[] = [];
      let calls: Received[] = [];
      let viaApi: any;

      beforeAll(async () => {
        const apiRt = await startScheduler(t.db, {}, { mode: "api" });
        const disp = await startScheduler(t.db, {}, { mode: "dispatcher" });
        let worker: Runtime | undefined;
        try {
          await createSchedule(apiRt, { id, cron: EVERY_2S, misfire: "skip", target: { url: `${rec.url}/${id}` } });
          await Bun.sleep(4500);
          snapshotAt = Date.now();
          before = await dbJobs(t.db, id);
          misfiredMetric = await metric(disp, "scheduler_occurrences_total", 'result="misfired"');
          const firstExpired = before.find((j) => j.status === "expired");
          if (firstExpired) viaApi = (await api(apiRt, "GET", `/v1/jobs/${firstExpired.id}`)).body;
          worker = await startScheduler(t.db, {}, { mode: "worker" });
          // Until a new occurrence has been called (one every 2 s; on a loaded machine the
          // worker's start can take the first one past its 1 s grace), then a little more for
          // any expired one that would wrongly be called too.
          await eventually(() => rec.calls(`/${id}`).length > 0, 10_000, "a call of a new occurrence once a worker runs");
          await Bun.sleep(1000);
          after = await dbJobs(t.db, id);
          calls = [...rec.calls(`/${id}`)];
          await api(apiRt, "DELETE", `/v1/schedules/${id}`);
        } finally {
          await worker?.stop();
          await disp.stop();
          await apiRt.stop();
        }
      });

      test("jobs past their grace with no worker to start them are expired (misfire) and counted", () => {
        // Generated at their nominal times, queued, never started: past nominal + 1 s they expire.
        const stale = before.filter((j) => j.nominal < snapshotAt - 1500);
        expect(stale.length).toBeGreaterThanOrEqual(1);
        expect(stale.map((j) => [iso(j.nominal), j.status, j.dead_reason, j.calls])).toEqual(stale.map((j) => [iso(j.nominal), "expired", "misfire", 0]));
        expect(misfiredMetric).toBeGreaterThanOrEqual(stale.length);
        expect(viaApi.status).toBe("expired");
        expect(viaApi.attempt_log).toEqual([]);
      });

      test("when a worker comes back, expired occurrences are never called; new ones are", () => {
        const expired = new Set(before.filter((j) => j.status === "expired").map((j) => j.id));
        expect(calls.filter((c) => expired.has(c.headers["webhook-id"])).map((c) => c.headers["scheduler-nominal-time"])).toEqual([]);
        for (const j of after.filter((x) => expired.has(x.id))) expect([j.status, j.calls]).toEqual(["expired", 0]);
        expect(calls.length).toBeGreaterThanOrEqual(1);
        expect(calls.filter(isCatchup)).toHaveLength(0);
      });
    });
  });
}
