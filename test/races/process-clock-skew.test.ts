import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";

// Issue 14, hole 7: the database's clock decides what is due. A real scheduler process whose
// clock is 20 s off (SCHEDULER_TEST_CLOCK_OFFSET_MS) takes a delayed job, a reschedule, a
// schedule and a manual trigger; each due instant must be the database's now + the delay,
// and each call must reach the target at or after it (never early), and not a skew late.
// The target runs in this test process, on the same host as PostgreSQL: its receive time is
// on the database's clock (checked below).

const DELAY_MS = 3000;
/** How late a call may be on a busy shared machine (the skew itself is 20 s). */
const LATE_MS = 4500;

for (const offset of [-20_000, 20_000]) {
  describe(`a process whose clock is ${offset > 0 ? "ahead of" : "behind"} the database's by ${Math.abs(offset) / 1000} s`, () => {
    let t: TestDb;
    let proc: Proc;
    const target = new Target();
    const row = async (id: string) => (await t.db.query<any>("SELECT * FROM jobs WHERE id = $1", [id]))[0];
    const callTo = (path: string) => eventually(() => target.callsTo(path)[0], 15_000, `a call to ${path}`);
    const tag = offset > 0 ? "ahead" : "behind";

    beforeAll(async () => {
      t = await freshDb("postgres");
      // This process's clock is the database's (same host): the receive times below are on it.
      const [{ skew }] = await t.db.query<{ skew: number }>("SELECT extract(epoch FROM clock_timestamp()) * 1000 - $1::float8 AS skew", [Date.now()]);
      expect(Math.abs(skew)).toBeLessThan(250);
      proc = await spawnScheduler(["--mode=all"], { DATABASE_URL: t.url!, SCHEDULER_TEST_CLOCK_OFFSET_MS: String(offset) });
    });
    afterAll(async () => {
      kill(proc);
      await proc?.exited;
      target.stop();
      await t?.close();
    });

    test("the start-up warns that the clock is shifted", () => {
      expect(proc.logs().some((l) => /SCHEDULER_TEST_CLOCK_OFFSET_MS/.test(l.msg) && l.offset_ms === offset)).toBe(true);
    });

    test(`delay 3s, a reschedule by delay 3s, a /trigger and a schedule's first fire: due on the database's clock, called at or after it`, async () => {
      const delayed = async () => {
        const r = await api(proc.url, "POST", "/v1/jobs", { delay: "3s", target: { url: `${target.url}/delay-${tag}` } });
        expect(r.status).toBe(201);
        const j = await row(r.body.id);
        const due = j.due_at.getTime();
        expect(due - j.created_at.getTime()).toBeGreaterThanOrEqual(DELAY_MS);
        expect(due - j.created_at.getTime()).toBeLessThan(DELAY_MS + 500);
        return { due, call: await callTo(`/delay-${tag}`) };
      };
      const rescheduled = async () => {
        const r = await api(proc.url, "POST", "/v1/jobs", { delay: "1h", target: { url: `${target.url}/resched-${tag}` } });
        expect(r.status).toBe(201);
        const p = await api(proc.url, "PATCH", `/v1/jobs/${r.body.id}`, { delay: "3s" });
        expect(p.status).toBe(200);
        const j = await row(r.body.id);
        const due = j.due_at.getTime();
        expect(due - j.updated_at.getTime()).toBeGreaterThanOrEqual(DELAY_MS);
        expect(due - j.updated_at.getTime()).toBeLessThan(DELAY_MS + 500);
        return { due, call: await callTo(`/resched-${tag}`) };
      };
      const triggered = async () => {
        const s = await api(proc.url, "POST", "/v1/schedules", { id: `yearly-${tag}`, cron: "0 0 1 1 *", target: { url: `${target.url}/trigger-${tag}` } });
        expect(s.status).toBe(201);
        const r = await api(proc.url, "POST", `/v1/schedules/yearly-${tag}/trigger`, {});
        expect(r.status).toBe(201);
        const j = await row(r.body.id);
        // A manual run's nominal time is now: the database's, in the transaction that inserts it.
        expect(Math.abs(j.nominal_time.getTime() - j.created_at.getTime())).toBeLessThan(500);
        expect(j.due_at.getTime()).toBe(j.nominal_time.getTime());
        return { due: j.due_at.getTime(), call: await callTo(`/trigger-${tag}`) };
      };
      const scheduled = async () => {
        const s = await api(proc.url, "POST", "/v1/schedules", { id: `every2-${tag}`, cron: "*/2 * * * * *", target: { url: `${target.url}/every2-${tag}` } });
        expect(s.status).toBe(201);
        const [sr] = await t.db.query<any>("SELECT created_at FROM schedules WHERE id = $1", [`every2-${tag}`]);
        const call = await callTo(`/every2-${tag}`);
        const [j] = await t.db.query<any>("SELECT * FROM jobs WHERE schedule_id = $1 ORDER BY nominal_time LIMIT 1", [`every2-${tag}`]);
        // The first fire is the rule's first instant after the database's now. Read from the
        // first occurrence, not from next_fire_at: on a loaded machine the generator may have
        // fired it and moved next_fire_at on before the schedule row is read (seen: 2,066 ms).
        const first = j.nominal_time.getTime() - sr.created_at.getTime();
        expect(first).toBeGreaterThan(0);
        expect(first).toBeLessThanOrEqual(2000);
        expect(call.headers["webhook-id"]).toBe(j.id);
        expect(call.headers["scheduler-catchup"]).toBeUndefined();
        return { due: j.due_at.getTime(), call };
      };
      const results: Record<string, { due: number; call: Received }> = {};
      await Promise.all(Object.entries({ delayed, rescheduled, triggered, scheduled }).map(async ([k, f]) => (results[k] = await f())));
      for (const [k, { due, call }] of Object.entries(results)) {
        // Never early by the database's clock, and not a skew late either.
        expect({ k, early: call.at < due }).toEqual({ k, early: false });
        expect({ k, late: call.at - due > LATE_MS }).toEqual({ k, late: false });
      }
    }, 30_000);
  });
}
