/**
 * Items held until their instant, on one timer set for the earliest of them: a claimed job
 * until it is due (the worker's DueGate), a call until its time limit (deliver). Holding and
 * removing are a map's set and delete; the timer moves only for an instant earlier than the
 * one it waits for, so it is not re-armed for every item. A timer per item (setTimeout, then
 * clearTimeout) cost ~2 µs of the JS thread a call (bench/README.md, part 20).
 */
export class Deadlines<K, T> {
  private readonly waiting = new Map<K, { at: number; item: T }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Number.POSITIVE_INFINITY;

  /**
   * `release` gets the items whose instant has come, earliest first. `now`: the clock the
   * instants are on. `unref`: the timer alone does not keep the process alive (the calls
   * whose limits it keeps do).
   */
  constructor(
    private readonly release: (items: T[]) => void,
    private readonly now: () => number = Date.now,
    private readonly unref = false,
  ) {}

  get size(): number {
    return this.waiting.size;
  }

  /** Holds `item` until `at` (on the `now` clock); a key held again keeps only the later hold. */
  hold(key: K, at: number, item: T): void {
    this.waiting.set(key, { at, item });
    if (at < this.timerAt) this.setTimer(at);
  }

  /** Takes an item out before its instant; with nothing left the timer goes too. */
  remove(key: K): T | undefined {
    const w = this.waiting.get(key);
    if (!w) return undefined;
    this.waiting.delete(key);
    if (this.waiting.size === 0) this.disarm();
    return w.item;
  }

  /** Everything still held (a stop): the caller deals with it. */
  drain(): T[] {
    this.disarm();
    const items = [...this.waiting.values()].map((w) => w.item);
    this.waiting.clear();
    return items;
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    const due = [...this.waiting.entries()].filter(([, w]) => w.at <= now).sort((a, b) => a[1].at - b[1].at);
    for (const [key] of due) this.waiting.delete(key);
    this.arm();
    if (due.length > 0) this.release(due.map(([, w]) => w.item));
  }

  private arm(): void {
    let next = Number.POSITIVE_INFINITY;
    for (const w of this.waiting.values()) next = Math.min(next, w.at);
    if (!Number.isFinite(next)) {
      this.disarm();
      return;
    }
    if (this.timer && this.timerAt <= next) return;
    this.setTimer(next);
  }

  private setTimer(at: number): void {
    this.disarm();
    this.timerAt = at;
    // A timer may fire a little early: fire() checks the clock and arms again.
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - this.now()));
    if (this.unref) this.timer.unref?.();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }
}
