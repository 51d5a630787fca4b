/**
 * Claimed jobs that are not due yet (pre-staged by the dispatcher, or handed over early by
 * anything else): each waits here until its due instant, and only then goes on to the
 * pre-call check, which refuses a job the database does not yet consider due. A worker that
 * called whatever it dequeued would run pre-staged jobs early.
 */
export class DueGate<T> {
  private readonly waiting = new Map<string, { dueMs: number; item: T }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  /**
   * `release` gets the jobs whose instant has come, in due order. `now`: the clock the due
   * instants are on (the database's, as the worker last measured it).
   */
  constructor(
    private readonly release: (items: T[]) => void,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.waiting.size;
  }

  has(id: string): boolean {
    return this.waiting.has(id);
  }

  /**
   * Holds a job until `due` (a Date from the database, microseconds cut to ms: the gate
   * opens 1 ms after, never before).
   */
  hold(id: string, due: Date, item: T): void {
    const dueMs = due.getTime() + 1;
    this.waiting.set(id, { dueMs, item });
    // Only an earlier instant than the timer's moves it: no scan of everything waiting per job.
    if (dueMs < this.timerAt) this.setTimer(dueMs);
  }

  remove(id: string): T | undefined {
    const w = this.waiting.get(id);
    this.waiting.delete(id);
    return w?.item;
  }

  /** Everything still waiting (a stop): the caller gives it back. */
  drain(): T[] {
    this.disarm();
    const items = [...this.waiting.values()].map((w) => w.item);
    this.waiting.clear();
    return items;
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.now();
    const due = [...this.waiting.entries()].filter(([, w]) => w.dueMs <= now).sort((a, b) => a[1].dueMs - b[1].dueMs);
    for (const [id] of due) this.waiting.delete(id);
    this.arm();
    if (due.length > 0) this.release(due.map(([, w]) => w.item));
  }

  private arm(): void {
    let next = Infinity;
    for (const w of this.waiting.values()) next = Math.min(next, w.dueMs);
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
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
