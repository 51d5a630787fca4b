import type { HostLimiter } from "./host-limiter.ts";
import type { InFlight } from "./in-flight.ts";

/**
 * Runs the worker's pass over the jobs held in memory for their target host (the limiter
 * keeps their order and timing): at once when kicked (a call ended, a cancel came), else when
 * a held job's host may have room again. One pass at a time; a kick during a pass runs
 * another right after it. The pass is the worker's: this keeps only the timing.
 */
export class HeldPump {
  private pumping = false;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  constructor(
    private readonly limiter: HostLimiter<InFlight>,
    /** The worker's pass: returns how many jobs are still held after it. */
    private readonly pass: () => Promise<number>,
    /** Runs a pass in the background (the worker tracks it for stop()). */
    private readonly background: (p: Promise<void>) => void,
  ) {}

  /** A pass now (or right after the one under way); `held`: jobs held now. */
  kick(held: number): void {
    if (held > 0 || this.pumping) this.background(this.pump());
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    let left = 0;
    try {
      do {
        this.again = false;
        left = await this.pass();
      } while (this.again);
    } finally {
      this.pumping = false;
      this.arm(left);
    }
  }

  /** Sets the timer for when a held job's host may have room again; `held`: jobs held now (0: none, or stopping). */
  arm(held: number): void {
    if (held === 0) {
      this.disarm();
      return;
    }
    const now = Date.now();
    const at = Math.max(now + 1, this.limiter.nextWakeAt(now));
    if (!Number.isFinite(at)) {
      this.disarm();
      return;
    }
    if (this.timer && this.timerAt <= at) return;
    this.disarm();
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.background(this.pump());
    }, at - now);
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
