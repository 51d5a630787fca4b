import type { NewJob } from "../store/jobs.ts";
import { occurrenceJob, windowJitter } from "../store/new-job.ts";
import type { ScheduleRow } from "../store/schedules.ts";
import type { Occurrence } from "./occurrence-plan.ts";

/**
 * Where an occurrence goes in time: its window's spread, and for a catch-up run the per-tenant
 * pace. Per tenant, so that one tenant's backlog (fire_all after an outage) does not push every
 * other tenant's catch-up behind it; the dispatch planner then shares workers between tenants
 * round robin.
 */
export class OccurrencePlacer {
  /** Per tenant, the earliest instant (epoch ms) its next catch-up occurrence may be due. */
  private cursor = new Map<string, number>();

  constructor(private readonly catchupPerSecond: number) {}

  place(s: ScheduleRow, occ: Occurrence, nowMs: number, heldBack: boolean): NewJob {
    const spread = occ.nominal + windowJitter(s.window_ms);
    let due = spread;
    if (occ.late) {
      // Catch-up is released at a bounded rate, never as one burst.
      due = Math.max(due, nowMs, this.cursor.get(s.tenant) ?? 0);
      // Cursors in the past hold nothing back: forgetting them loses nothing.
      if (this.cursor.size >= 10_000) for (const [t, at] of this.cursor) if (at <= nowMs) this.cursor.delete(t);
      this.cursor.set(s.tenant, due + 1000 / this.catchupPerSecond);
    }
    return occurrenceJob(s, { ...occ, spread, due, heldBack });
  }

  /** The pace as it is now; `restore` puts it back when what was placed is not written. */
  snapshot(): Map<string, number> {
    return new Map(this.cursor);
  }

  restore(snapshot: Map<string, number>): void {
    this.cursor = snapshot;
  }
}
