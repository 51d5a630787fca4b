export class DurationError extends Error {
  constructor(input: unknown, why: string) {
    super(`invalid duration ${JSON.stringify(input)}: ${why}; use a whole number with a unit (250ms, 30s, 5m, 2h, 1d) or integer milliseconds`);
    this.name = "DurationError";
  }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const FORM = /^(\d+)(ms|s|m|h|d)?$/;

/** "250ms" | "30s" | "5m" | "2h" | "1d" | integer ms (number, or a string of digits) → ms. */
export function parseDuration(input: string | number): number {
  if (typeof input === "number") {
    if (!Number.isInteger(input)) throw new DurationError(input, "not a whole number of milliseconds");
    if (input < 0) throw new DurationError(input, "negative");
    if (!Number.isSafeInteger(input)) throw new DurationError(input, "too large");
    return input;
  }
  if (typeof input !== "string") throw new DurationError(input, "not a string or number");
  const m = FORM.exec(input.trim());
  if (!m) {
    const why = input.trim() === "" ? "empty" : input.trim().startsWith("-") ? "negative" : "not a recognised form";
    throw new DurationError(input, why);
  }
  const ms = Number(m[1]) * UNIT_MS[m[2] ?? "ms"];
  if (!Number.isSafeInteger(ms)) throw new DurationError(input, "too large");
  return ms;
}

const PARTS: [unit: string, ms: number][] = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
];

/** Compact form for logs: 1500 → "1.5s", 90000 → "1m30s", 250 → "250ms". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let rest = Math.round(ms);
  let out = "";
  for (const [unit, size] of PARTS) {
    if (rest >= size) {
      out += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  if (rest > 0) {
    // Seconds keep up to three decimals so no millisecond is lost, without trailing zeros.
    out += `${Number((rest / 1000).toFixed(3))}s`;
  }
  return out;
}
