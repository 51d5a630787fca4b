/**
 * A sleep that can be cut short: by wake(), or by wakeAt() naming an earlier instant.
 * Loops sleep until the earliest known due time and let notifications shorten the sleep.
 */
export class Sleeper {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private resolve: (() => void) | undefined;
  private deadline = Infinity;
  private pendingWake = false;
  /** The earliest wakeAt() that came while awake: the next sleep ends by then. */
  private pendingAt = Infinity;

  /** Sleeps up to ms; returns early on wake(). A wake() that came while awake is not lost. */
  sleep(ms: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    const at = Math.min(Date.now() + Math.max(0, ms), this.pendingAt);
    this.pendingAt = Infinity;
    if (at <= Date.now()) return Promise.resolve();
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.deadline = at;
      this.arm();
    });
  }

  wake(): void {
    if (!this.resolve) {
      this.pendingWake = true;
      return;
    }
    this.fire();
  }

  /** Shortens the current sleep so that it ends at atMs (epoch ms) at the latest. */
  wakeAt(atMs: number): void {
    if (!this.resolve) {
      if (atMs <= Date.now()) this.pendingWake = true;
      else this.pendingAt = Math.min(this.pendingAt, atMs);
      return;
    }
    if (atMs >= this.deadline) return;
    this.deadline = atMs;
    this.arm();
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), Math.max(0, this.deadline - Date.now()));
  }

  private fire(): void {
    clearTimeout(this.timer);
    const r = this.resolve;
    this.resolve = undefined;
    this.deadline = Infinity;
    r?.();
  }
}
