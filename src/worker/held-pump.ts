import type { HostLimiter } from "./host-limiter.ts";
import type { InFlight } from "./worker.ts";

export interface HeldPumpOptions {
  limiter: HostLimiter<InFlight>;
  /** The worker is stopping: it gives the held jobs back itself. */
  stopping: () => boolean;
  /** Held jobs cancelled or whose lease was lost: back to the database, not called. */
  giveBack: (fs: InFlight[]) => Promise<void>;
  /** Held longer than a host's wait allows: handed back, due again at `at`. */
  defer: (overdue: { item: InFlight; at: number }[]) => Promise<void>;
  /** Jobs whose host has room now: the pre-call check and the call. */
  begin: (ready: InFlight[]) => Promise<void>;
  /** Runs a pass in the background, logging its failure. */
  background: (p: Promise<void>) => void;
}

/**
 * Claimed jobs waiting in memory for their target host to have room (the host limiter keeps
 * their order and timing). A pass starts those whose host has room, gives back those
 * cancelled and hands back those held too long; a timer runs the next pass when a host may
 * have room again, and so does every finished call (kick).
 */
export class HeldPump {
  private readonly held = new Set<string>();
  private pumping = false;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  constructor(private readonly o: HeldPumpOptions) {}

  get size(): number {
    return this.held.size;
  }

  has(id: string): boolean {
    return this.held.has(id);
  }

  add(id: string): void {
    this.held.add(id);
  }

  delete(id: string): void {
    this.held.delete(id);
  }

  /** A pass now (or right after the one under way). */
  kick(): void {
    if (this.held.size === 0 && !this.pumping) return;
    this.o.background(this.pump());
  }

  private async pump(): Promise<void> {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        if (this.o.stopping()) return;
        const aborted = this.o.limiter.removeHeld((f) => f.abort.signal.aborted);
        if (aborted.length > 0) await this.o.giveBack(aborted);
        const { ready, overdue } = this.o.limiter.pump(Date.now());
        for (const f of ready) this.held.delete(f.job.id);
        if (overdue.length > 0) {
          for (const x of overdue) this.held.delete(x.item.job.id);
          await this.o.defer(overdue);
        }
        await this.o.begin(ready);
      } while (this.again);
    } finally {
      this.pumping = false;
      this.arm();
    }
  }

  /** Sets the timer for when a held job's host may have room again. */
  arm(): void {
    if (this.o.stopping() || this.held.size === 0) {
      this.disarm();
      return;
    }
    const now = Date.now();
    const at = Math.max(now + 1, this.o.limiter.nextWakeAt(now));
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
      this.kick();
    }, at - now);
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
