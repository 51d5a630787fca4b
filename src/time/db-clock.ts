import type { Queryable } from "../store/db.ts";
import { databaseClock } from "../store/jobs.ts";

/** Resync this often: a host clock stepped by NTP is followed within this long. */
const SYNC_MS = 10_000;
/** Readings per sync; the one with the shortest round trip is kept. */
const SAMPLES = 3;

/**
 * The database's clock as this process sees it: the process clock plus an offset measured
 * against the database. It decides only when to wake up and ask; every "is it due" is
 * answered by the database's now() in SQL. The offset is measured after the answer came back,
 * so now() never reads ahead of the database (up to drift since the last sync): a wake-up
 * planned from it is late by at most a round trip, never early.
 */
export class DbClock {
  private offsetMs = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  /** Without a database (unit tests): the process clock. */
  constructor(private readonly db?: Queryable) {}

  /** The database's now, estimated (epoch ms). */
  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** The process-clock instant at which the database's clock reads dbMs. */
  toLocal(dbMs: number): number {
    return dbMs - this.offsetMs;
  }

  /**
   * Reads the database's clock SAMPLES times and keeps the reading with the shortest round
   * trip. The error of a reading is the time between the server's now() and this process
   * handling the answer: one reading taken while the process was busy (start-up on a loaded
   * machine) would make every timed wake-up late by that pause until the next sync, 10 s on.
   */
  async sync(): Promise<void> {
    if (!this.db) return;
    let best: { rtt: number; offset: number } | undefined;
    for (let i = 0; i < SAMPLES; i++) {
      const sent = performance.now();
      const now = await databaseClock(this.db);
      const offset = now.getTime() - Date.now();
      const rtt = performance.now() - sent;
      if (!best || rtt < best.rtt) best = { rtt, offset };
    }
    this.offsetMs = best!.offset;
  }

  /** Syncs now, then every SYNC_MS in the background. */
  async start(onError: (err: unknown) => void): Promise<void> {
    await this.sync();
    this.timer ??= setInterval(() => this.sync().catch(onError), SYNC_MS);
    this.timer.unref?.();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
