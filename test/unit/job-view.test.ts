import { expect, test } from "bun:test";
import { jobView } from "../../src/api/job-view.ts";
import type { JobRow } from "../../src/store/types.ts";
import { newJob } from "../helpers/jobs.ts";

// A new job's row as the store returns it, with the instants under test.
const row = (at: { due: Date | number; created: Date; finished: Date | null }): JobRow =>
  ({
    ...newJob(),
    status: "scheduled",
    due_at: at.due,
    scheduled_for: at.due,
    version: 1,
    calls: 0,
    host_limits: null,
    verify_url: null,
    checkpoint: null,
    cancel_requested: false,
    epoch: 0,
    dead_reason: null,
    replays: 0,
    created_at: at.created,
    updated_at: at.created,
    finished_at: at.finished,
    last_error: null,
  }) as unknown as JobRow;

// The view keeps the last instant it formatted (a batch's jobs share theirs): whatever the
// order, every instant shows as its own ISO string, and an instant that is not one as null.
test("jobView: each instant as its own ISO string, whatever came before; infinity and invalid as null", () => {
  const a = new Date("2031-05-06T07:08:09.123Z");
  const b = new Date("2031-05-06T07:08:09.124Z");
  const c = new Date("1999-12-31T23:59:59.999Z");
  const cases = [
    { due: a, created: b, finished: null },
    { due: a, created: a, finished: c },
    { due: b, created: a, finished: b },
    { due: new Date(Number.NaN), created: c, finished: null },
    { due: Number.POSITIVE_INFINITY, created: c, finished: a },
    { due: c, created: b, finished: null },
  ];
  const iso = (d: Date | number | null) => (d instanceof Date && Number.isFinite(d.getTime()) ? d.toISOString() : null);
  for (const at of cases) {
    const v = jobView(row(at));
    expect([v.due_at, v.scheduled_for, v.created_at, v.updated_at, v.finished_at]).toEqual([
      iso(at.due),
      iso(at.due),
      iso(at.created),
      iso(at.created),
      iso(at.finished),
    ]);
  }
});
