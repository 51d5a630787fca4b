import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob, jobRow } from "../helpers/jobs.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

const schedule = (target: Target, over: Record<string, unknown> = {}) => ({
  cron: "0 0 1 1 *",
  timezone: "UTC",
  target: { url: `${target.url}/s` },
  ...over,
});

for (const driver of DRIVERS) {
  describe(`schedules stay safe when something goes wrong (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    const target = new Target();
    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db);
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
      target.stop();
    });

    test("a schedule whose stored rule no longer parses is paused with the reason; other schedules and jobs go on", async () => {
      expect((await api(rt, "POST", "/v1/schedules", schedule(target, { id: "broken", cron: "* * * * * *" }))).status).toBe(201);
      expect(
        (await api(rt, "POST", "/v1/schedules", schedule(target, { id: "healthy", cron: "* * * * * *", target: { url: `${target.url}/healthy` } }))).status,
      ).toBe(201);
      // As if an upgrade stopped accepting what an older version stored.
      await t.db.query("UPDATE schedules SET cron = 'not a cron', next_fire_at = now() WHERE id = 'broken'");
      const paused = await eventually(
        async () => {
          const s = (await api(rt, "GET", "/v1/schedules/broken")).body;
          return s.paused ? s : undefined;
        },
        5000,
        "broken schedule paused",
      );
      expect(paused.paused_reason).toContain("generation failed");
      expect((await api(rt, "GET", "/v1/schedules")).status).toBe(200);
      const job = (await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/one-off` } })).body;
      await eventually(async () => (await jobRow(t.db, job.id)).status === "succeeded", 5000, "one-off job ran");
      await eventually(() => target.callsTo("/healthy").length >= 2, 5000, "healthy schedule fired");
      await api(rt, "DELETE", "/v1/schedules/healthy");
    });

    test("PATCH of end_at alone keeps the schedule's place; an end_at before it ends the rule", async () => {
      const created = (await api(rt, "POST", "/v1/schedules", schedule(target, { id: "bounds", cron: "0 9 * * *", paused: true }))).body;
      await t.db.query("UPDATE schedules SET next_fire_at = now() - interval '2 hours' WHERE id = 'bounds'");
      const before = (await api(rt, "GET", "/v1/schedules/bounds")).body.next_fire_at;
      const later = await api(rt, "PATCH", "/v1/schedules/bounds", { end_at: "2099-01-01T00:00:00Z" });
      expect(later.status).toBe(200);
      expect(later.body.next_fire_at).toBe(before);
      const ended = await api(rt, "PATCH", "/v1/schedules/bounds", { end_at: new Date(Date.parse(before) - 60_000).toISOString(), start_at: null });
      expect(ended.status).toBe(200);
      expect(ended.body.next_fire_at).toBeNull();
      expect(created.version).toBe(1);
    });
  });
}

describe("overlap=queue: two occurrences finishing at once release the held one (postgres)", () => {
  // Two transactions on separate connections finish A and B concurrently; each trigger must
  // see the other's commit (the schedule row lock serialises them), or the held job waits
  // for ever. PGlite has one connection, so this needs a real server.
  let t: TestDb;
  beforeAll(async () => {
    t = await freshDb("postgres");
  });
  afterAll(async () => {
    await t?.close();
  });

  test("the held occurrence is released", async () => {
    await t.db.query(`INSERT INTO schedules (tenant, id, cron, timezone, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms, misfire, catchup_window_ms, overlap, max_queued)
      VALUES ('default', 'q', '* * * * *', 'UTC', '{"url":"http://127.0.0.1:9/x","method":"POST","headers":{},"body":null,"json":false}', 3, 1000, 1000, 1000, 'fire_once', 86400000, 'queue', 1)`);
    const mk = (n: number, held = false) =>
      insertJob(t.db, {
        schedule_id: "q",
        nominal_time: new Date(Date.UTC(2030, 0, 1, 0, n)),
        idempotency_key: `q@${n}`,
        // As the generator makes an overlap=queue schedule's occurrences: each runs the release (029).
        releases_held: true,
        ...(held
          ? {
              due_at: "infinity" as const,
              scheduled_for: new Date(),
              start_by: new Date(Date.now() + 3_600_000),
              catchup_after: new Date(Date.now() + 3_600_000),
            }
          : {}),
      });
    const a = await mk(1);
    const b = await mk(2);
    const h = await mk(3, true);
    await t.db.query("UPDATE jobs SET status = 'running', lease_owner = 'w', lease_until = now() + interval '1 min' WHERE id = ANY($1::uuid[])", [
      [a.id, b.id],
    ]);
    const c1 = openPostgres({ url: t.url!, maxConnections: 1 });
    const c2 = openPostgres({ url: t.url!, maxConnections: 1 });
    try {
      const first = c1.tx(async (q) => {
        await q.query("UPDATE jobs SET status = 'succeeded' WHERE id = $1", [a.id]);
        await Bun.sleep(300); // B finishes meanwhile
      });
      await Bun.sleep(50);
      const second = c2.tx(async (q) => {
        await q.query("UPDATE jobs SET status = 'succeeded' WHERE id = $1", [b.id]);
      });
      await Promise.all([first, second]);
    } finally {
      await c1.close();
      await c2.close();
    }
    const row = await jobRow(t.db, h.id);
    expect(row.due_at instanceof Date && Number.isFinite(row.due_at.getTime())).toBe(true);
    // Its start-by counts from the release, not from its nominal time.
    expect(row.start_by.getTime()).toBeGreaterThan(Date.now() + 3_000_000);
  });
});
