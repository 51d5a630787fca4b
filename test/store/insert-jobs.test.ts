/**
 * InsertJobs reads its batch as insertJson writes it (src/store/jobs.ts): instants as epoch
 * milliseconds, a held occurrence's due_at as "Infinity", absent values as absent keys, the
 * target and host limits as json cast to jsonb. What lands in the row must be exactly what
 * the caller gave: every instant to the millisecond, 'infinity', NULLs, and the JSON values.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { insertJobs, insertJson } from "../../src/store/jobs.ts";
import { withTestFaults } from "../../src/store/test-faults.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { jobRow, newJob } from "../helpers/jobs.ts";

const ms = (d: unknown) => (d instanceof Date ? d.getTime() : d);

for (const driver of DRIVERS) {
  describe(`InsertJobs (${driver})`, () => {
    let t: TestDb;
    beforeAll(async () => {
      t = await freshDb(driver);
    });
    afterAll(() => t.close());

    test("every instant lands to the millisecond, the JSON values as given, absent ones NULL", async () => {
      const at = (s: string) => new Date(s);
      const full = newJob({
        due_at: at("2031-05-06T07:08:09.123Z"),
        scheduled_for: at("2031-05-06T07:08:09.001Z"),
        nominal_time: at("2031-05-06T07:08:00.999Z"),
        expires_at: at("2031-05-07T00:00:00.007Z"),
        start_by: at("2031-05-06T07:08:10.500Z"),
        catchup_after: at("2031-05-06T07:08:11.250Z"),
        catchup: true,
        schedule_id: "s1",
        idempotency_key: "k-1",
        request_hash: "h",
        host_limits: { rate: 5, concurrency: 2 },
        verify_url: "http://127.0.0.1:9/verify",
        target: { url: "http://127.0.0.1:9/x", method: "PUT", headers: { "x-a": "é \u2028" }, body: '{"a":[1,2,{"b":null}]}', json: true },
      });
      const bare = newJob({ due_at: at("2031-01-01T00:00:00.000Z") });
      const held = newJob({ due_at: "infinity", scheduled_for: at("2031-02-03T04:05:06.789Z") });
      const results = await insertJobs(t.db, [full, bare, held]);
      expect(results.map((r) => r.kind)).toEqual(["created", "created", "created"]);

      const f = await jobRow(t.db, full.id);
      expect([f.due_at, f.scheduled_for, f.nominal_time, f.expires_at, f.start_by, f.catchup_after].map(ms)).toEqual(
        [full.due_at, full.scheduled_for, full.nominal_time, full.expires_at, full.start_by, full.catchup_after].map(ms),
      );
      expect([f.catchup, f.schedule_id, f.idempotency_key, f.request_hash, f.verify_url]).toEqual([true, "s1", "k-1", "h", full.verify_url]);
      expect(f.host_limits).toEqual({ rate: 5, concurrency: 2 });
      expect(f.target).toEqual(full.target);

      const b = await jobRow(t.db, bare.id);
      expect(ms(b.due_at)).toBe((bare.due_at as Date).getTime());
      expect(ms(b.scheduled_for)).toBe((bare.due_at as Date).getTime()); // defaults to due_at
      expect([b.nominal_time, b.expires_at, b.start_by, b.catchup_after, b.host_limits, b.verify_url, b.idempotency_key, b.schedule_id]).toEqual([
        null,
        null,
        null,
        null,
        null,
        null,
        null,
        null,
      ]);
      expect(b.catchup).toBe(false);

      const [h] = await t.db.query<{ held: boolean; shown: Date }>("SELECT due_at = 'infinity' AS held, scheduled_for AS shown FROM jobs WHERE id = $1", [
        held.id,
      ]);
      expect(h.held).toBe(true);
      expect(ms(h.shown)).toBe((held.scheduled_for as Date).getTime());
    });

    test("a batch without keys (InsertJobsUnkeyed) and one with (InsertJobs) write the same rows; keys still dedupe", async () => {
      const due = new Date("2031-03-04T05:06:07.089Z");
      // Which statement a batch takes: the other one, made to fail, must not run.
      const failing = (query: string) => withTestFaults(t.db, [{ query, code: "40P01", probability: 1 }]);
      const unkeyed = [newJob({ due_at: due }), newJob({ due_at: due })];
      const unkeyedResults = await insertJobs(failing("InsertJobs"), unkeyed);
      expect(unkeyedResults.map((r) => r.kind)).toEqual(["created", "created"]);
      await expect(insertJobs(failing("InsertJobsUnkeyed"), [newJob({ due_at: due })])).rejects.toThrow();

      const key = `k-${Bun.randomUUIDv7()}`;
      const mixed = [newJob({ due_at: due }), newJob({ due_at: due, idempotency_key: key, request_hash: "h1" })];
      expect((await insertJobs(failing("InsertJobsUnkeyed"), mixed)).map((r) => r.kind)).toEqual(["created", "created"]);
      await expect(insertJobs(failing("InsertJobs"), [newJob({ due_at: due, idempotency_key: `k-${Bun.randomUUIDv7()}` })])).rejects.toThrow();
      // The key repeated beside an unkeyed job: that one is created, the repeat finds the first.
      const again = [newJob({ due_at: due }), newJob({ due_at: due, idempotency_key: key, request_hash: "h1" })];
      const r = await insertJobs(t.db, again);
      expect(r.map((x) => x.kind)).toEqual(["created", "existing"]);
      expect(r[1].job.id).toBe(mixed[1].id);

      // Rows alike whichever statement wrote them.
      const cols = (row: Record<string, unknown>) => {
        const rest = { ...row };
        for (const k of ["id", "idempotency_key", "request_hash", "created_at", "updated_at", "lease_key", "slot"]) delete rest[k];
        return rest;
      };
      expect(cols(await jobRow(t.db, unkeyed[0].id))).toEqual(cols(await jobRow(t.db, mixed[1].id)));
    });

    test("a delay is counted from the database's now(), as before", async () => {
      const j = newJob({ due_at: null, delay_ms: 60_000 });
      const [{ now }] = await t.db.query<{ now: Date }>("SELECT now() AS now");
      await insertJobs(t.db, [j]);
      const r = await jobRow(t.db, j.id);
      const d = ms(r.due_at) as number;
      expect(d).toBeGreaterThanOrEqual(now.getTime() + 60_000);
      expect(d).toBeLessThan(now.getTime() + 60_000 + 10_000);
    });
  });
}

test("insertJson: instants as epoch milliseconds, 'infinity' as \"Infinity\", absent values left out", () => {
  const j = newJob({ due_at: "infinity", scheduled_for: new Date(1_900_000_000_123), delay_ms: undefined });
  const [o] = JSON.parse(insertJson([j]));
  expect(o.due_at_ms).toBe("Infinity");
  expect(o.scheduled_for_ms).toBe(1_900_000_000_123);
  for (const k of ["idempotency_key", "request_hash", "schedule_id", "nominal_time_ms", "expires_at_ms", "host_limits", "verify_url", "delay_ms"])
    expect(k in o).toBe(false);
  expect(Object.values(o).some((v) => typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v))).toBe(false);
});
