// The kinds of value an environment variable holds, as valibot schemas over the raw string.
// Each issue message completes a sentence that starts with the variable's name
// ("SCHEDULER_LEASE_TTL must be at least 1000 ms").
import * as v from "valibot";
import { parseByteSize } from "../byte-size.ts";
import { parseDuration } from "../time/duration.ts";

export const int = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, `must be a whole number from ${min} to ${max}`),
    v.transform(Number),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

export const duration = (minMs: number) =>
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseDuration(dataset.value);
      } catch {
        addIssue({ message: `must be a duration like "250ms", "30s", "5m" or whole milliseconds` });
        return NEVER;
      }
    }),
    v.minValue(minMs, `must be at least ${minMs} ms`),
  );

export const size = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseByteSize(dataset.value);
      } catch (err) {
        addIssue({ message: (err as Error).message });
        return NEVER;
      }
    }),
    v.minValue(min, `must be at least ${min} bytes`),
    v.maxValue(max, `must be at most ${max} bytes`),
  );

/** A retention period: a duration of at least 1 s, or "0" / "off" to keep for ever (null). */
export const retention = v.union(
  [
    v.pipe(
      v.picklist(["0", "off"]),
      v.transform(() => null),
    ),
    duration(1000),
  ],
  'must be a duration like "7d" or "12h", or "off" (or 0) to keep for ever',
);

export const bool = v.pipe(
  v.picklist(["0", "1", "true", "false", ""], 'must be "1" or "0"'),
  v.transform((s) => s === "1" || s === "true"),
);

export const nonEmpty = v.pipe(v.string(), v.minLength(1, "must not be empty"));

export const regionName = v.pipe(v.string(), v.regex(/^[a-z0-9-]{1,32}$/, "must be a region name like iad or local"));

/** Calls per second, decimals allowed. */
export const rate = (example: string) =>
  v.pipe(
    v.string(),
    v.regex(/^\d{1,7}(\.\d{1,6})?$/, `must be calls per second, a number like ${example}`),
    v.transform(Number),
    v.minValue(0.001, "must be at least 0.001"),
    v.maxValue(1_000_000, "must be at most 1000000"),
  );

/**
 * A value read by a parser of its own (tokens, signing secrets, quotas, faults): what it throws
 * becomes the issue, so the message names the bad entry the way the parser words it.
 */
export const parsedBy = <T>(parse: (raw: string) => T) =>
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parse(dataset.value);
      } catch (err) {
        addIssue({ message: (err as Error).message });
        return NEVER;
      }
    }),
  );
