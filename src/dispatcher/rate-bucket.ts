/**
 * A token bucket: `ratePerSec` tokens a second, holding at most a tenth of a second's worth
 * (at least one), so no one-second window ever sees more than ~1.1 × the rate, even right
 * after a quiet period. Time is this process's
 * monotonic clock: rates are local pacing, not a cluster-wide guarantee (one dispatcher
 * leads at a time, so in practice they are).
 */
export class RateBucket {
  private tokens: number;
  private at: number;
  readonly capacity: number;

  constructor(
    readonly ratePerSec: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(ratePerSec > 0)) throw new Error(`rate must be positive, got ${ratePerSec}`);
    this.capacity = Math.max(1, Math.ceil(ratePerSec / 10));
    this.tokens = this.capacity;
    this.at = now();
  }

  /** Whole tokens available now. */
  available(): number {
    this.refill();
    return Math.floor(this.tokens);
  }

  /** Takes n tokens (may go negative: a claim can return more than was planned for). */
  take(n: number): void {
    this.refill();
    this.tokens -= n;
  }

  /** Milliseconds until at least one token is available (0 when one is). */
  msUntilToken(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) / this.ratePerSec) * 1000);
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.at) / 1000) * this.ratePerSec);
    this.at = t;
  }
}
