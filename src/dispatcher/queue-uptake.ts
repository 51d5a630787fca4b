const UPTAKE_WINDOW_MS = 250;

/**
 * How many jobs to keep queued for workers elsewhere: half a second of what workers have
 * been taking (taken = what the queue held after the last queueing claim minus what it holds
 * now), at least 16, at most `cap`. Measured over windows of a few hundred ms: passes come
 * too close together for a rate per pass to mean anything.
 */
export class QueueUptake {
  /** The queue depth at the end of the last queueing claim. */
  private lastDepth: number | undefined;
  private window = { since: 0, taken: 0 };
  /** Jobs per second workers took from the queue, smoothed. */
  private perSec = 0;

  target(depth: number, cap: number): number {
    const now = performance.now();
    if (this.lastDepth !== undefined) {
      this.window.taken += Math.max(0, this.lastDepth - depth);
      const dt = now - this.window.since;
      if (dt >= UPTAKE_WINDOW_MS) {
        this.perSec = 0.5 * this.perSec + 0.5 * ((this.window.taken * 1000) / dt);
        this.window = { since: now, taken: 0 };
      }
    } else {
      this.window = { since: now, taken: 0 };
    }
    return Math.max(16, Math.min(cap, Math.ceil(this.perSec * 0.5)));
  }

  /** After a queueing claim: the queue now holds this many. */
  queued(depth: number): void {
    this.lastDepth = depth;
  }
}
