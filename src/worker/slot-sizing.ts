/**
 * How far ahead of its call slots a worker works, from what it has measured: how fast calls
 * end (the prefetch: jobs held claimed beyond the calls) and how long a call and a pre-call
 * check take (arming: checked jobs waiting for a slot). All smoothed; nothing before the
 * first measurements.
 */

/** How far ahead of its calls the worker keeps claimed jobs at hand: the call rate × this. */
const PREFETCH_HORIZON_MS = 250;
/**
 * Calls at least this short (on average) let the worker open the next slots' attempts while
 * the current calls run (see armAhead): an armed job then waits for its slot about one call.
 */
const ARM_MAX_CALL_MS = 100;
/**
 * Armed jobs per call slot at most (a slow database makes each check bring more). In one
 * process each claim is the check, and claims run one after another: with 4 a slot, a claim
 * brought ~130 jobs per ~15 ms round trip and the slots sat idle most of it (4.3k calls/s);
 * with 16 it brought what the slots call in one round trip, and still hit the ceiling in a
 * burst (round trips of 10–50 ms against calls of ~1 ms). 48: the margin below fits under it.
 */
const ARM_MAX_FACTOR = 48;
/**
 * Round trips' worth of calls kept armed. One round trip's worth runs dry whenever the next
 * claim is slower than the smoothed figure or is sent late (the dispatcher sends one claim at
 * a time, and the next only once there is room): through a burst the slots then sat with no
 * call at all for ~20 % of the time, waiting for a claim in flight (bench/README part 15).
 * With three, ~10–13 %, and 7–18 % more deliveries a second in alternated runs. An armed job
 * waits for its slot up to about three round trips (tens of ms) with its attempt open; the
 * worker's room (calls + prefetch) bounds how many wait so.
 */
const ARM_MARGIN = 3;

export class SlotSizing {
  /** Calls finished per second, smoothed: sizes the prefetch. */
  private callRate = 0;
  /** How long a call takes, smoothed (ms); undefined before the first. */
  private callMs: number | undefined;
  /** How long a pre-call check takes, smoothed (ms). */
  private checkMs: number | undefined;
  private rateAt = performance.now();
  private rateCount = 0;

  constructor(
    private readonly o: {
      concurrency: number;
      /** The prefetch's ceiling (WorkerOptions.prefetch). */
      prefetch?: number;
      /** Reserved slots configured: nothing is armed ahead (see armAhead). */
      reservedSlots: boolean;
    },
  ) {}

  /** A call answered after `ms`. */
  callEnded(ms: number): void {
    this.callMs = this.callMs === undefined ? ms : this.callMs * 0.9 + ms * 0.1;
    // The rate, over ~200 ms windows.
    this.rateCount++;
    const now = performance.now();
    const dt = now - this.rateAt;
    if (dt < 200) return;
    const rate = (this.rateCount * 1000) / dt;
    this.callRate = this.callRate === 0 ? rate : this.callRate * 0.7 + rate * 0.3;
    this.rateCount = 0;
    this.rateAt = now;
  }

  /** A pre-call check (or a claim that was one) took `ms`. */
  checked(ms: number): void {
    this.checkMs = this.checkMs === undefined ? ms : this.checkMs * 0.8 + ms * 0.2;
  }

  /**
   * Checked jobs kept armed beyond the free call slots while calls are short (ARM_MAX_CALL_MS):
   * as many as the slots call during ARM_MARGIN pre-call checks, at least one per slot, at
   * most ARM_MAX_FACTOR per slot (and never beyond the worker's room: its calls plus its
   * prefetch). Each check then carries the next slots' jobs while the current calls run, and a
   * slot that frees is used at once, not after a round trip; an armed job waits for its slot
   * a few checks' round trips at most. With slower calls nothing is armed ahead, so an
   * attempt is never opened long before its call.
   */
  armAhead(): number {
    // Reserved slots are counted over calls: an armed job of the ordinary class would take
    // the next free slot whatever its class, so with them nothing is armed ahead.
    if (this.o.reservedSlots || this.callMs === undefined || this.callMs > ARM_MAX_CALL_MS) return 0;
    // What the slots call while a check is under way (Little's law), times the margin: a
    // check that takes as long as ten calls must bring ten slots' worth, or the slots wait for it.
    const perCheck = Math.ceil((ARM_MARGIN * this.o.concurrency * (this.checkMs ?? 0)) / Math.max(1, this.callMs));
    return Math.min(ARM_MAX_FACTOR * this.o.concurrency, Math.max(this.o.concurrency, perCheck));
  }

  /**
   * Jobs the worker keeps claimed beyond its calls: what it calls in PREFETCH_HORIZON_MS, or
   * what it arms ahead if that is more (within the ceiling either way).
   */
  prefetchTarget(): number {
    const max = this.o.prefetch ?? 0;
    return Math.min(max, Math.max(this.o.concurrency, Math.ceil((this.callRate * PREFETCH_HORIZON_MS) / 1000), this.armAhead()));
  }
}
