// overlap=skip and an occurrence that can no longer start. An occurrence not started by its
// start-by (its misfire grace) never runs: the misfire expiry ends it, once a pass. Until that
// pass it is still 'scheduled'. If the next occurrence's generation comes in between (a busy
// machine: seen with four test files at once on PGlite), counting it as "the previous one
// still in progress" made overlap=skip drop the next one as well, so that neither ran.
// Forced here: the occurrence before has its start-by in the past (set by hand, no expiry
// pass), and the next occurrence comes due.
import { describe, expect, test } from "bun:test";
import { insertSchedule } from "../../src/store/schedules.ts";
import { DRIVERS, describeDb } from "../helpers/db.ts";
import { dbJobs, generationPass, iso, scheduleFields } from "../schedules/gen-support.ts";

for (const driver of DRIVERS) {
  describe(`overlap=skip behind an occurrence that can no longer start (${driver})`, () => {
    const t = describeDb(driver);

    const HOUR = 3_600_000;

    /** An hourly schedule, overlap skip, two hours of grace (nothing is missed by lateness), due at the last full hour. */
    async function schedule(id: string): Promise<number> {
      const f = scheduleFields(id, {
        cron: "0 0 * * * *",
        misfire: "skip",
        misfire_grace_ms: 2 * HOUR,
        overlap: "skip",
        next_fire_at: new Date(Math.floor(Date.now() / HOUR) * HOUR),
      });
      const row = await insertSchedule(t.db, f, { actor: "test", reason: null });
      return row!.next_fire_at!.getTime();
    }

    const pass = () => generationPass(t.db);

    /**
     * The schedule's first occurrence becomes the one before (an hour earlier, with its key),
     * its start-by `startBy` ago or ahead, and the hour comes due again: the next pass
     * generates that hour's occurrence behind it. No waiting on the clock: the rule is hourly.
     */
    async function behindPrevious(id: string, startByMs: number) {
      const hour = await schedule(id);
      await pass();
      const [j1, ...more] = await dbJobs(t.db, id);
      expect({ nominal: j1?.nominal, more: more.length }).toEqual({ nominal: hour, more: 0 });
      await t.db.query(`UPDATE jobs SET nominal_time = $2, idempotency_key = $3, start_by = now() + make_interval(secs => $4::float8 / 1000) WHERE id = $1`, [
        j1!.id,
        new Date(hour - HOUR),
        `${id}@${iso(hour - HOUR)}`,
        startByMs,
      ]);
      await t.db.query("UPDATE schedules SET next_fire_at = $2 WHERE id = $1", [id, new Date(hour)]);
      await pass();
      const [s] = await t.db.query<{ occurrences_skipped: number }>("SELECT occurrences_skipped FROM schedules WHERE id = $1", [id]);
      return { hour, jobs: (await dbJobs(t.db, id)).map((j) => `${iso(j.nominal)} ${j.status}`), skipped: Number(s!.occurrences_skipped) };
    }

    test("the one before never started and is past its start-by (no expiry pass yet): the next occurrence is created, not skipped", async () => {
      const r = await behindPrevious("unstartable", -1000);
      expect(r).toEqual({ hour: r.hour, jobs: [`${iso(r.hour - HOUR)} scheduled`, `${iso(r.hour)} scheduled`], skipped: 0 });
    });

    test("the one before may still start (within its grace): the next occurrence is skipped, as overlap=skip says", async () => {
      const r = await behindPrevious("startable", 60_000);
      expect(r).toEqual({ hour: r.hour, jobs: [`${iso(r.hour - HOUR)} scheduled`], skipped: 1 });
    });
  });
}
