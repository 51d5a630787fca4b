/** What the worker holds now, as the ledger needs it (the worker counts it; the ledger asks nothing back). */
export interface SlotLoad {
  /** Jobs the worker may hold at once: its calls plus its prefetch (which varies). */
  capacity: number;
  /** Slots taken now: calls, and jobs claimed for a call (not those waiting for their host). */
  busy: number;
  /** Of those, jobs below the reserved class (0 without reserved slots). */
  busyBelow: number;
  /** No more slots are handed out (the worker is stopping). */
  closed: boolean;
}

/**
 * A worker's room for claimed jobs (its calls plus its prefetch). Slots are promised before a
 * claim is sent (by the worker's loop or by a dispatcher in the same process), so two claims
 * in flight cannot overshoot it; with reserved slots, jobs below the reserved class may fill
 * only the others. The worker passes its load at each question.
 */
export class SlotLedger {
  /** Slots promised to claims under way. */
  private promised = 0;
  /** Of those, the ones promised to claims for any priority (they may bring low-priority jobs). */
  private promisedAny = 0;
  constructor(private readonly reserved?: { slots: number; minPriority: number }) {}

  /** Room for more calls of any priority. */
  free(load: SlotLoad): number {
    if (load.closed) return 0;
    const total = this.total(load);
    const rs = this.reserved;
    if (!rs) return Math.max(0, total);
    return Math.max(0, Math.min(total, load.capacity - rs.slots - load.busyBelow - this.promisedAny));
  }

  /** Room for jobs of the reserved class (everything not taken or promised). */
  room(load: SlotLoad): number {
    return load.closed ? 0 : Math.max(0, this.total(load));
  }

  /** Promises up to n slots for a claim of any priority; returns how many. */
  take(n: number, load: SlotLoad): number {
    const k = Math.min(n, this.free(load));
    this.promised += k;
    this.promisedAny += k;
    return k;
  }

  giveBack(n: number): void {
    this.promised -= n;
    this.promisedAny -= n;
  }

  /** The room only the reserved class may use, after take() had what any job may use. */
  takeReserved(n: number, load: SlotLoad): number {
    if (!this.reserved || load.closed) return 0;
    const k = Math.max(0, Math.min(n, this.total(load)));
    this.promised += k;
    return k;
  }

  giveBackReserved(n: number): void {
    this.promised -= n;
  }

  private total(load: SlotLoad): number {
    return load.capacity - load.busy - this.promised;
  }
}
