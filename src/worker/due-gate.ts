import { Deadlines } from "../time/deadlines.ts";

/**
 * Claimed jobs that are not due yet (pre-staged by the dispatcher, or handed over early by
 * anything else): each waits here until its due instant, and only then goes on to the
 * pre-call check, which refuses a job the database does not yet consider due. A worker that
 * called whatever it dequeued would run pre-staged jobs early.
 */
export class DueGate<T> {
  private readonly waiting: Deadlines<string, T>;

  /**
   * `release` gets the jobs whose instant has come, in due order. `now`: the clock the due
   * instants are on (the database's, as the worker last measured it).
   */
  constructor(release: (items: T[]) => void, now: () => number = Date.now) {
    this.waiting = new Deadlines(release, now);
  }

  /**
   * Holds a job until `due` (a Date from the database, microseconds cut to ms: the gate
   * opens 1 ms after, never before).
   */
  hold(id: string, due: Date, item: T): void {
    this.waiting.hold(id, due.getTime() + 1, item);
  }

  remove(id: string): T | undefined {
    return this.waiting.remove(id);
  }

  /** Everything still waiting (a stop): the caller gives it back. */
  drain(): T[] {
    return this.waiting.drain();
  }
}
