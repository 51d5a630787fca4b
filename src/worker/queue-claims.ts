import type { Logger } from "../obs/log.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";

/**
 * The worker's claim loop over the queue: a pass claims for the slots free now; a pass that
 * claimed something is followed by another at once, else the next waits the poll interval
 * (±20 %) or a poke (NOTIFY on scheduler_queued, room freed in the worker).
 */
export class QueueClaims extends PeriodicLoop<number> {
  constructor(
    private readonly worker: { claimPass(): Promise<number> },
    log: Logger,
    private readonly pollIntervalMs: number,
  ) {
    super("worker claim", log);
  }

  runOnce(): Promise<number> {
    return this.worker.claimPass();
  }

  protected nextDelayMs(claimed: number | undefined): number {
    return claimed ? 0 : this.pollIntervalMs * (0.8 + Math.random() * 0.4);
  }
}
