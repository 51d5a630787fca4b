/** Capped exponential backoff with full jitter: uniform in [0, min(maxMs, baseMs * 2^(attempt-1))]. attempt is 1-based (the attempt that just failed). */
export function backoffDelay(p: { attempt: number; baseMs: number; maxMs: number; random?: () => number }): number {
  const random = p.random ?? Math.random;
  const baseMs = Math.max(0, finiteOr(p.baseMs, 0));
  const maxMs = Math.max(0, finiteOr(p.maxMs, 0));
  const attempt = Math.max(1, Math.floor(finiteOr(p.attempt, 1)));
  // 2^1100 is Infinity and Infinity * 0 is NaN; past 2^52 the cap has long since won anyway.
  const exponent = Math.min(attempt - 1, 52);
  const ceiling = Math.min(maxMs, baseMs * 2 ** exponent);
  // Clamp r so a misbehaving injected random cannot push the delay outside the window.
  const r = Math.min(1, Math.max(0, finiteOr(random(), 0)));
  return Math.floor(r * ceiling);
}

function finiteOr(n: number, fallback: number): number {
  return Number.isFinite(n) ? n : fallback;
}
