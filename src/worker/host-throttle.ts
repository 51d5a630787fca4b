/**
 * A target that answered 429/503 is given room: further calls to that host wait until its
 * Retry-After (or the backoff) has passed. In memory, per worker process: a hint, not state.
 */
export class HostThrottle {
  private until = new Map<string, number>();

  note(url: string, untilMs: number): void {
    const host = hostOf(url);
    if (!host) return;
    if ((this.until.get(host) ?? 0) < untilMs) this.until.set(host, untilMs);
    if (this.until.size > 10_000) this.prune(Date.now());
  }

  /** The instant before which this host should not be called, or undefined. */
  blockedUntil(url: string, nowMs: number): number | undefined {
    const host = hostOf(url);
    const t = host ? this.until.get(host) : undefined;
    if (t === undefined) return undefined;
    if (t <= nowMs) {
      this.until.delete(host!);
      return undefined;
    }
    return t;
  }

  private prune(nowMs: number): void {
    for (const [h, t] of this.until) if (t <= nowMs) this.until.delete(h);
  }
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}
