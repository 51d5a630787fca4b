/**
 * A dispatcher's idle wait looks at its own shards' jobs only. It read the next scheduled job
 * of any shard: one due in a shard another dispatcher holds (that dispatcher dead, paused or
 * behind) looked like a due job its claim could not see, and it passed again every 5 ms, a
 * claim and a read each time, until that job was claimed; a dead holder's shards lapse only
 * after SCHEDULER_LEADER_TTL. Now the wait reads up to NEXT_DUE_LOOK jobs in due order for one
 * of its own; finding none while the others' are overdue, it reads again from when its claim
 * began and waits until its own next, and until the last one read while they are not. (A
 * look every 50 ms made its own jobs up to 50 ms late; a read from its own now missed one
 * due while the pass ran.) The generation gate does the same with schedules.
 *
 * Forced here: two shards, shard 1 held by a live dispatcher that never claims (a lease row
 * of the test's), shard 0 taken by the scheduler under test, and jobs due in shard 1.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import type { Db } from "../../src/store/db.ts";
import { insertSchedule, NEXT_FIRE_LOOK, nextFireAt } from "../../src/store/schedules.ts";
import { scheduleFields } from "../schedules/gen-support.ts";
import { NEXT_DUE_LOOK } from "../../src/store/dispatch-queries.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { holdRowLock } from "../helpers/row-lock.ts";
import { eventually } from "../helpers/target.ts";
import { insertJob } from "../helpers/jobs.ts";
import { startScheduler } from "../helpers/scheduler.ts";

/** A version 7 id whose slot (its last 12 bits) puts it in shard `shard` of 2. */
function idInShard(shard: 0 | 1): string {
  const id = Bun.randomUUIDv7();
  const slot = shard * 2048 + Math.floor(Math.random() * 2048);
  return id.slice(0, -3) + slot.toString(16).padStart(3, "0");
}

/** A schedule id (tenant "default") whose slot puts it in shard `shard` of 2. */
async function scheduleIdInShard(db: Db, shard: 0 | 1): Promise<string> {
  for (;;) {
    const id = `s-${crypto.randomUUID().slice(0, 8)}`;
    const [{ slot }] = await db.query<{ slot: number }>("SELECT hashtext('default/' || $1) & 4095 AS slot", [id]);
    if (Math.floor(slot / 2048) === shard) return id;
  }
}

const YEARLY = "0 0 0 1 1 *";
const by = { actor: "test", reason: null };

/** Passes the dispatcher ends in `ms`. */
async function passesIn(rt: Runtime, ms: number): Promise<number> {
  const end = Date.now() + ms;
  let n = 0;
  while (Date.now() < end) {
    await rt.dispatcher!.passDone();
    n++;
  }
  return n;
}

for (const driver of DRIVERS) {
  describe(`a dispatcher beside another's overdue shard (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime | undefined;
    beforeEach(async () => {
      t = await freshDb(driver);
      // Shard 1 of 2 held for an hour by a live dispatcher "other": the fair share is 1 each.
      await t.db.query(
        `INSERT INTO leases (name, owner, epoch, lease_until, acquired_at) VALUES
           ('dispatch:1', 'other', 1, now() + interval '1 hour', now()),
           ('dispatcher:other', 'other', 0, now() + interval '1 hour', now())`,
      );
    });
    afterEach(async () => {
      await rt?.stop();
      rt = undefined;
      await t.close();
    });

    async function start(): Promise<Runtime> {
      const r = await startScheduler(t.db, { SCHEDULER_SHARDS: "2", SCHEDULER_POLL_INTERVAL: "5s" }, { mode: "dispatcher" });
      await eventually(() => r.dispatcher!.shards.current.length === 1, 5000, "the scheduler holding shard 0");
      expect(r.dispatcher!.shards.current.map((h) => h.shard)).toEqual([0]);
      return r;
    }

    test("more of the other's jobs overdue than it reads: it sleeps until its own next job, not a look every 5 ms, and claims it on time", async () => {
      for (let i = 0; i < NEXT_DUE_LOOK + 36; i++) await insertJob(t.db, { id: idInShard(1), due_at: new Date(Date.now() - 1000) });
      rt = await start();
      // Its own job, due in 1.5 s.
      const mine = await insertJob(t.db, { id: idInShard(0), due_at: new Date(Date.now() + 1500) });
      const passes = await passesIn(rt, 1000);
      // It sleeps until its own job (a look every 50 ms made ~20, every 5 ms 100-200).
      expect(passes).toBeLessThanOrEqual(5);
      await eventually(
        async () => (await t.db.query("SELECT 1 FROM jobs WHERE id = $1 AND status <> 'scheduled'", [mine.id])).length === 1,
        5000,
        "its own job claimed",
      );
      const [{ late_ms }] = await t.db.query<{ late_ms: number }>(
        "SELECT extract(epoch FROM queued_at - due_at)::float8 * 1000 AS late_ms FROM jobs WHERE id = $1",
        [mine.id],
      );
      expect(late_ms).toBeGreaterThanOrEqual(0);
      expect(late_ms).toBeLessThan(1000);
      // The other's jobs were never its to claim.
      const [{ n }] = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'scheduled' AND slot >= 2048");
      expect(n).toBe(NEXT_DUE_LOOK + 36);
    });

    test("its own jobs falling due while the other's stay overdue are claimed at their instants, one due during the pass too", async () => {
      for (let i = 0; i < NEXT_DUE_LOOK + 36; i++) await insertJob(t.db, { id: idInShard(1), due_at: new Date(Date.now() - 1000) });
      // Pairs 10 ms apart. The pass that claims a pair's first one is held 25 ms after its
      // claim's reply: the second falls due after that claim began and before the wait's reads.
      const firsts = new Set<string>();
      rt = await startScheduler(
        t.db,
        { SCHEDULER_SHARDS: "2", SCHEDULER_POLL_INTERVAL: "5s" },
        {
          mode: "dispatcher",
          afterClaimReply: async (jobs) => {
            if (jobs.some((j) => firsts.has(j.id))) await Bun.sleep(25);
          },
        },
      );
      await eventually(() => rt!.dispatcher!.shards.current.length === 1, 5000, "the scheduler holding shard 0");
      // Created ahead: each one's NOTIFY shortens only the sleep it comes in, so its instant is
      // found by the wait's reads. The first read sees only the other's overdue jobs.
      const base = Date.now() + 700;
      const pairs: [string, string][] = [];
      for (let i = 0; i < 8; i++) {
        const a = await insertJob(t.db, { id: idInShard(0), due_at: new Date(base + i * 230) });
        const b = await insertJob(t.db, { id: idInShard(0), due_at: new Date(base + i * 230 + 10) });
        firsts.add(a.id);
        pairs.push([a.id, b.id]);
      }
      const ids = pairs.flat();
      await eventually(
        async () => (await t.db.query("SELECT 1 FROM jobs WHERE id = ANY($1) AND status <> 'scheduled'", [ids])).length === 16,
        8000,
        "its own jobs claimed",
      );
      const rows = await t.db.query<{ id: string; late_ms: number }>(
        "SELECT id::text, extract(epoch FROM queued_at - due_at)::float8 * 1000 AS late_ms FROM jobs WHERE id = ANY($1)",
        [ids],
      );
      const late = new Map(rows.map((r) => [r.id, Math.round(r.late_ms)]));
      const first = pairs.map(([a]) => late.get(a)!);
      const second = pairs.map(([, b]) => late.get(b)!);
      for (const ms of [...first, ...second]) expect(ms).toBeGreaterThanOrEqual(0);
      const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
      const seen = `first ones late ms: ${first.join(", ")}; second ones: ${second.join(", ")}`;
      // A second read from its own now missed each pair's second until the next pair's wake-up:
      // ~220 ms late, 8 of 8 (224-229 measured).
      expect(median(second), seen).toBeLessThan(150);
      // PGlite runs its queries on the test process's own thread, which the suite's other files
      // starve: with the suite and two busy loops beside it, its firsts were 63, 48, 38, 80, 18,
      // 24, 14, 13 and its seconds 189, 165, 198, 70, 84, 14, 4, 81, where PostgreSQL's were at
      // most 13 and 57. Its run holds the median above (the same dispatcher code); the
      // PostgreSQL run holds the timing.
      if (driver === "postgres") {
        // A look every 50 ms made a third of the firsts 35 ms late or more. Under CI's full
        // suite (test files in parallel on two cores) the seconds were 112, 110, 55, 78, 66, 83,
        // 12, 71: a loaded box, not a missed read, so their line is at 150 ms.
        expect(first.filter((ms) => ms >= 35).length, seen).toBeLessThanOrEqual(2);
        expect(second.filter((ms) => ms >= 150).length, seen).toBeLessThanOrEqual(2);
      }
    });

    test("a schedule of the other's overdue: no generation pass every 5 ms, and its own schedule's occurrence made on time", async () => {
      // More than the gate reads: its first read finds none of its own.
      for (let i = 0; i < NEXT_FIRE_LOOK + 6; i++) {
        const id = await scheduleIdInShard(t.db, 1);
        await insertSchedule(t.db, scheduleFields(id, { cron: YEARLY, next_fire_at: new Date(Date.now() - 1000), misfire: "skip" }), by);
      }
      rt = await start();
      const own = await scheduleIdInShard(t.db, 0);
      const fireAt = Date.now() + 1500;
      await insertSchedule(t.db, scheduleFields(own, { cron: YEARLY, next_fire_at: new Date(fireAt), misfire: "skip" }), by);
      await rt.dispatcher!.passDone({ poke: true });
      // The gate took the other's overdue schedule for its own: a generation transaction on
      // every pass, a pass every 5 ms (~100-200 a second).
      expect(await passesIn(rt, 1000)).toBeLessThanOrEqual(5);
      await eventually(async () => (await t.db.query("SELECT 1 FROM jobs WHERE schedule_id = $1", [own])).length === 1, 5000, "its occurrence made");
      const [{ late_ms }] = await t.db.query<{ late_ms: number }>(
        "SELECT extract(epoch FROM created_at - nominal_time)::float8 * 1000 AS late_ms FROM jobs WHERE schedule_id = $1",
        [own],
      );
      expect(late_ms).toBeGreaterThanOrEqual(0);
      expect(late_ms).toBeLessThan(100);
      // The other's schedules were never its to make.
      const [{ n }] = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE schedule_id <> $1", [own]);
      expect(n).toBe(0);
    });

    // PostgreSQL only: PGlite has one connection, no lock can be held beside the pass.
    if (driver === "postgres") {
      test("its own schedule locked when its pass ran is made a poll interval after the lock goes, the other's still overdue", async () => {
        for (let i = 0; i < NEXT_FIRE_LOOK + 6; i++) {
          const id = await scheduleIdInShard(t.db, 1);
          await insertSchedule(t.db, scheduleFields(id, { cron: YEARLY, next_fire_at: new Date(Date.now() - 1000), misfire: "skip" }), by);
        }
        rt = await startScheduler(t.db, { SCHEDULER_SHARDS: "2", SCHEDULER_POLL_INTERVAL: "1s" }, { mode: "dispatcher" });
        await eventually(() => rt!.dispatcher!.shards.current.length === 1, 5000, "the scheduler holding shard 0");
        const own = await scheduleIdInShard(t.db, 0);
        const fireAt = Date.now() + 800;
        await insertSchedule(t.db, scheduleFields(own, { cron: YEARLY, next_fire_at: new Date(fireAt), misfire: "skip", misfire_grace_ms: 600_000 }), by);
        // Locked across its instant by a transaction of the test's: its pass skips it.
        const lock = await holdRowLock(t.url!, "SELECT 1 FROM schedules WHERE tenant = 'default' AND id = $1 FOR UPDATE", [own]);
        try {
          await Bun.sleep(Math.max(0, fireAt - Date.now() + 600));
          expect((await t.db.query("SELECT 1 FROM jobs WHERE schedule_id = $1", [own])).length).toBe(0);
          await lock.release();
          const freed = Date.now();
          // Read only from its last pass on, it was never found again while the other's stayed due.
          await eventually(async () => (await t.db.query("SELECT 1 FROM jobs WHERE schedule_id = $1", [own])).length === 1, 5000, "its occurrence made");
          expect(Date.now() - freed).toBeLessThan(2000);
        } finally {
          await lock.release();
        }
      });
    }

    test("a shard taken over opens the generation gate: its due schedule made at once, by a dispatcher that never idles", async () => {
      // Its queue full (no worker takes from it): every pass is capped and never reaches the
      // idle path's read of the next fire; only the poll interval's refresh (5 s here) would.
      for (let i = 0; i < 600; i++) await insertJob(t.db, { id: idInShard(0), due_at: new Date(Date.now() - 1000) });
      const theirs = await scheduleIdInShard(t.db, 1);
      await insertSchedule(
        t.db,
        scheduleFields(theirs, { cron: YEARLY, next_fire_at: new Date(Date.now() - 1000), misfire: "skip", misfire_grace_ms: 600_000 }),
        by,
      );
      rt = await startScheduler(
        t.db,
        { SCHEDULER_SHARDS: "2", SCHEDULER_POLL_INTERVAL: "5s", SCHEDULER_LEADER_TTL: "3s", SCHEDULER_CLOCK_SKEW: "100ms" },
        { mode: "dispatcher" },
      );
      await eventually(() => rt!.dispatcher!.shards.current.length === 1, 5000, "the scheduler holding shard 0");
      await eventually(async () => (await t.db.query("SELECT 1 FROM jobs WHERE status = 'queued'")).length > 0, 5000, "a queue");
      await Bun.sleep(300);
      // The other dispatcher dies: its leases lapse, and shard 1 is taken over.
      await t.db.query("UPDATE leases SET lease_until = now() - interval '1 minute' WHERE owner = 'other'");
      let took = 0;
      await eventually(
        () => {
          if (rt!.dispatcher!.shards.current.length < 2) return false;
          took = Date.now();
          return true;
        },
        15_000,
        "shard 1 taken over",
      );
      await eventually(
        async () => (await t.db.query("SELECT 1 FROM jobs WHERE schedule_id = $1", [theirs])).length === 1,
        10_000,
        "the schedule's occurrence made",
      );
      const madeIn = Date.now() - took;
      expect(madeIn, "ms from the takeover to the occurrence").toBeLessThan(1500);
    });

    test("NextFireAt: past a full read of the other's schedules, a bound; from an instant past them, its own", async () => {
      const now = Date.now();
      for (let i = 0; i < NEXT_FIRE_LOOK; i++) {
        const id = await scheduleIdInShard(t.db, 1);
        await insertSchedule(t.db, scheduleFields(id, { cron: YEARLY, next_fire_at: new Date(now - 60_000 + i), misfire: "skip" }), by);
      }
      const own = now + 30_000;
      await insertSchedule(t.db, scheduleFields(await scheduleIdInShard(t.db, 0), { cron: YEARLY, next_fire_at: new Date(own), misfire: "skip" }), by);
      const mine = { list: [0], count: 2 };
      // The answer without the database's clock, which every read carries.
      const nextFire = async (...a: Parameters<typeof nextFireAt>) => {
        const { dbNow, ...fire } = await nextFireAt(...a);
        expect(Math.abs(dbNow.getTime() - Date.now())).toBeLessThan(5_000);
        return fire;
      };
      expect(await nextFire(t.db, 0, mine)).toEqual({ notBefore: new Date(now - 60_000 + NEXT_FIRE_LOOK - 1) });
      expect(await nextFire(t.db, 0, mine, new Date(now))).toEqual({ at: new Date(own) });
      // Read from before the other's: the bound again.
      expect(await nextFire(t.db, 0, mine, new Date(now - 120_000))).toEqual({ notBefore: new Date(now - 60_000 + NEXT_FIRE_LOOK - 1) });
      // Every shard: the first schedule, as before shards.
      expect(await nextFire(t.db, 0, { list: [0, 1], count: 2 })).toEqual({ at: new Date(now - 60_000) });
      // Made ahead 10 s before: the own one's instant to be made, found in the first read's
      // made-ahead half (the other's are due already, not ahead).
      expect(await nextFire(t.db, 10_000, mine)).toEqual({ notBefore: new Date(now - 60_000 + NEXT_FIRE_LOOK - 1) });
      expect(await nextFire(t.db, 10_000, mine, new Date(now))).toEqual({ at: new Date(own - 10_000) });
    });

    test("fewer of the other's jobs overdue than it reads: it sleeps until its own next job, which is claimed on time", async () => {
      for (let i = 0; i < 10; i++) await insertJob(t.db, { id: idInShard(1), due_at: new Date(Date.now() - 1000) });
      rt = await start();
      const mine = await insertJob(t.db, { id: idInShard(0), due_at: new Date(Date.now() + 1500) });
      // The pass that follows the write reads the new job; after it, none until its instant.
      await rt.dispatcher!.passDone({ poke: true });
      expect(await passesIn(rt, 700)).toBeLessThanOrEqual(2);
      await eventually(
        async () => (await t.db.query("SELECT 1 FROM jobs WHERE id = $1 AND status <> 'scheduled'", [mine.id])).length === 1,
        5000,
        "its own job claimed",
      );
      const [{ late_ms }] = await t.db.query<{ late_ms: number }>(
        "SELECT extract(epoch FROM queued_at - due_at)::float8 * 1000 AS late_ms FROM jobs WHERE id = $1",
        [mine.id],
      );
      expect(late_ms).toBeGreaterThanOrEqual(0);
      expect(late_ms).toBeLessThan(1000);
    });
  });
}
