/**
 * A worker's room for claimed jobs (its calls plus its prefetch). Slots are promised before a
 * claim is sent (by the worker's loop or by a dispatcher in the same process), so two claims
 * in flight cannot overshoot it; with reserved slots, jobs below the reserved class may fill only the others.
 */
export class SlotLedger {
  /** Slots promised to claims under way. */
  private promised = 0;
  /** Of those, the ones promised to claims for any priority (they may bring low-priority jobs). */
  private promisedAny = 0;
  constructor(
    private readonly o: {
      /** Jobs the worker may hold at once: its calls plus its prefetch (which may vary). */
      concurrency: () => number;
      /** No more slots are handed out (the worker is stopping). */
      closed: () => boolean;
      reserved?: { slots: number; minPriority: number };
      /** Slots taken now: calls, and jobs claimed for a call (not those waiting for their host). */
      busy: () => number;
      /** Of those, jobs below the reserved class (only asked with reserved slots). */
      busyBelow: (minPriority: number) => number;
    },
  ) {}

  /** Room for more calls of any priority. */
  free(): number {
    if (this.o.closed()) return 0;
    const total = this.total();
    const rs = this.o.reserved;
    if (!rs) return Math.max(0, total);
    return Math.max(0, Math.min(total, this.o.concurrency() - rs.slots - this.o.busyBelow(rs.minPriority) - this.promisedAny));
  }

  /** Room for jobs of the reserved class (everything not taken or promised). */
  room(): number {
    return this.o.closed() ? 0 : Math.max(0, this.total());
  }

  /** Promises up to n slots for a claim of any priority; returns how many. */
  take(n: number): number {
    const k = Math.min(n, this.free());
    this.promised += k;
    this.promisedAny += k;
    return k;
  }

  giveBack(n: number): void {
    this.promised -= n;
    this.promisedAny -= n;
  }

  /** The room only the reserved class may use, after take() had what any job may use. */
  takeReserved(n: number): number {
    if (!this.o.reserved || this.o.closed()) return 0;
    const k = Math.max(0, Math.min(n, this.total()));
    this.promised += k;
    return k;
  }

  giveBackReserved(n: number): void {
    this.promised -= n;
  }

  private total(): number {
    return this.o.concurrency() - this.o.busy() - this.promised;
  }
}
