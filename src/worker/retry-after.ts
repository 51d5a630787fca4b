const MAX_DELAY_MS = 30 * 24 * 60 * 60 * 1000;
const DELTA_SECONDS = /^\d+$/;
// Date.parse also accepts ISO strings and bare numbers; only the three RFC 9110 forms are HTTP-dates.
const IMF_FIXDATE = /^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC_850 = /^[A-Za-z]{6,9}, \d{2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/** Parses a Retry-After header: delta-seconds or an HTTP-date. Returns the delay in ms from nowMs (>= 0), or null when absent or unparseable. */
export function parseRetryAfter(header: string | null | undefined, nowMs: number): number | null {
  if (header == null) return null;
  const value = header.trim();
  if (value === "") return null;

  if (DELTA_SECONDS.test(value)) {
    // A long digit string can become Infinity; the cap turns that into a finite delay.
    return Math.min(Number(value) * 1000, MAX_DELAY_MS);
  }

  if (!IMF_FIXDATE.test(value) && !RFC_850.test(value) && !ASCTIME.test(value)) return null;
  // asctime carries no zone, and RFC 9110 says it is UTC; Date.parse would read it as local time.
  const at = Date.parse(ASCTIME.test(value) ? `${value} GMT` : value);
  if (!Number.isFinite(at)) return null;
  return Math.min(Math.max(0, at - nowMs), MAX_DELAY_MS);
}
