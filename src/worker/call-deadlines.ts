/** One call's time limit: `fire` runs once at `at` (performance.now()) unless the call ended first. */
export interface Deadline {
  readonly at: number;
  readonly ms: number;
  fire: (() => void) | null;
}

/**
 * The time limits of the calls in flight, on one timer. A timer of its own for every call
 * (setTimeout, then clearTimeout when it answers) cost ~2 µs of the JS thread a call, in a
 * path of ~25 (bench/README.md, part 20); calls almost never reach their limit. Calls with
 * the same limit end in the order they started, near enough, so each limit keeps a line in
 * deadline order and the timer waits for the earliest head of a line.
 */
export class CallDeadlines {
  /** By limit (ms): deadlines in the order they were added, which is deadline order. */
  private readonly lines = new Map<number, { list: Deadline[]; head: number; live: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private armedAt = Number.POSITIVE_INFINITY;
  private live = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** `fire` runs once, `ms` from now, unless end() is called for it before. */
  add(ms: number, fire: () => void): Deadline {
    const d: Deadline = { at: this.now() + ms, ms, fire };
    let line = this.lines.get(ms);
    if (!line) {
      line = { list: [], head: 0, live: 0 };
      this.lines.set(ms, line);
    }
    line.list.push(d);
    line.live++;
    this.live++;
    if (d.at < this.armedAt) this.arm(d.at);
    return d;
  }

  /** The call ended: its limit will not fire. */
  end(d: Deadline): void {
    if (!d.fire) return;
    d.fire = null;
    this.live--;
    const line = this.lines.get(d.ms);
    if (!line) return;
    line.live--;
    this.settle(d.ms, line);
    if (this.live === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.armedAt = Number.POSITIVE_INFINITY;
    }
  }

  /** Calls whose limit has not fired nor ended (for tests and gauges). */
  size(): number {
    return this.live;
  }

  /**
   * Drops ended heads; one long call ahead of many short ones leaves ended entries behind
   * it, so a line with more than twice as many of those as live ones is compacted.
   */
  private settle(ms: number, line: { list: Deadline[]; head: number; live: number }): void {
    const { list } = line;
    while (line.head < list.length && list[line.head].fire === null) line.head++;
    if (line.head === list.length) {
      // Every entry ended: the line goes. One already dropped (its last call ended inside a
      // limit's abort) may have been replaced by a new line for the same limit: not that one.
      line.list = [];
      line.head = 0;
      if (this.lines.get(ms) === line) this.lines.delete(ms);
      return;
    }
    const ended = list.length - line.head - line.live;
    if (line.head > 1024 || ended > 2 * line.live + 1024) {
      line.list = list.filter((x, i) => i >= line.head && x.fire !== null);
      line.head = 0;
    }
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.armedAt = at;
    // A timer may wake a little before its time: fire() looks again and re-arms.
    this.timer = setTimeout(() => this.fire(), Math.max(0, Math.ceil(at - this.now())));
    // The calls keep the process alive while they run, not their limits.
    this.timer.unref?.();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [ms, line] of [...this.lines]) {
      while (line.head < line.list.length) {
        const d = line.list[line.head];
        if (d.fire !== null && d.at > now) break;
        line.head++;
        if (d.fire === null) continue;
        const f = d.fire;
        d.fire = null;
        line.live--;
        this.live--;
        f();
      }
      this.settle(ms, line);
      const head = line.list[line.head];
      if (head) next = Math.min(next, head.at);
    }
    if (next < Number.POSITIVE_INFINITY && next < this.armedAt) this.arm(next);
  }
}
