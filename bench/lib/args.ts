import { parseArgs } from "node:util";

export interface BenchArgs {
  jobs: number;
  /** Phase 2: due times spread over this many ms. */
  spreadMs: number;
  /** Per phase, from its first due instant: give up waiting after this. */
  timeoutMs: number;
  concurrency: number;
  json?: string;
  /** Phase 1: the burst is due this long after creation starts. */
  leadMs: number;
  /** Phase 2: the first due time is this long after creation ends (estimated). */
  gapMs: number;
  batch: number;
  postConcurrency: number;
  /** After the last expected call, keep listening this long for duplicates. */
  settleMs: number;
  logLevel: string;
  schedulerLog?: string;
}

export const USAGE = `usage: bun bench/throughput.ts [options]     (npm run bench -- [options])

  --jobs N              jobs per phase (5000)
  --spread DUR          phase 2: due times spread over DUR (5s)
  --timeout DUR         per phase, from its first due instant (120s)
  --concurrency N       WORKER_CONCURRENCY of the scheduler (200)
  --json FILE           also write the figures as JSON
  --lead DUR            phase 1: the burst is due DUR after creation starts (3s)
  --gap DUR             phase 2: first due time DUR after creation ends (2s)
  --batch N             jobs per POST /v1/jobs/batch (1000, the API's maximum)
  --post-concurrency N  batch requests in flight while creating (2)
  --settle DUR          after the last call, listen this long for duplicates (1s)
  --log-level LEVEL     the scheduler's LOG_LEVEL (warn)
  --scheduler-log FILE  where the scheduler's output goes (a temp file)

DUR: 5, 5s, 500ms, 2m (a bare number is seconds).
Database: DATABASE_URL or TEST_DATABASE_URL (npm run bench starts a throwaway
server); with neither, the embedded PGlite. SCHEDULER_* variables are passed on
to the scheduler, e.g. SCHEDULER_DISPATCH_BATCH=1000.`;

export class UsageError extends Error {}

export function duration(flag: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(raw.trim());
  if (!m) throw new UsageError(`--${flag} must be a duration like 5, 5s, 500ms or 2m (got ${JSON.stringify(raw)})`);
  const unit = { ms: 1, s: 1000, m: 60_000 }[(m[2] ?? "s") as "ms" | "s" | "m"];
  return Math.round(Number(m[1]) * unit);
}

export function whole(flag: string, raw: string, min: number, max: number): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})`);
  return n;
}

/** Returns undefined for --help (after printing the usage). */
export function parseBenchArgs(argv: string[]): BenchArgs | undefined {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        jobs: { type: "string" },
        spread: { type: "string" },
        timeout: { type: "string" },
        concurrency: { type: "string" },
        json: { type: "string" },
        lead: { type: "string" },
        gap: { type: "string" },
        batch: { type: "string" },
        "post-concurrency": { type: "string" },
        settle: { type: "string" },
        "log-level": { type: "string" },
        "scheduler-log": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return undefined;
  }
  const levels = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
  const logLevel = values["log-level"] ?? "warn";
  if (!levels.includes(logLevel)) throw new UsageError(`--log-level must be one of ${levels.join(", ")}`);
  const a: BenchArgs = {
    jobs: values.jobs ? whole("jobs", values.jobs, 1, 10_000_000) : 5000,
    spreadMs: values.spread ? duration("spread", values.spread) : 5000,
    timeoutMs: values.timeout ? duration("timeout", values.timeout) : 120_000,
    concurrency: values.concurrency ? whole("concurrency", values.concurrency, 1, 10_000) : 200,
    json: values.json,
    leadMs: values.lead ? duration("lead", values.lead) : 3000,
    gapMs: values.gap ? duration("gap", values.gap) : 2000,
    batch: values.batch ? whole("batch", values.batch, 1, 1000) : 1000,
    postConcurrency: values["post-concurrency"] ? whole("post-concurrency", values["post-concurrency"], 1, 64) : 2,
    settleMs: values.settle ? duration("settle", values.settle) : 1000,
    logLevel,
    schedulerLog: values["scheduler-log"],
  };
  if (a.spreadMs < 1) throw new UsageError("--spread must be more than 0");
  return a;
}

/**
 * The start every bench with whole-number flags shares: `--help` prints the usage and exits
 * 0; the reader it returns parses one flag, and a bad value exits 2 with one line and the usage.
 */
export function wholeFlagsOrExit(who: string, usage: string, help: boolean | undefined): (name: string, raw: string | undefined, dflt: number) => number {
  if (help) {
    console.log(usage);
    process.exit(0);
  }
  return (name, raw, dflt) => wholeFlagOrExit(who, usage, name, raw, dflt);
}

/**
 * A whole-number flag, or its default when absent; bad input ends the bench with one line
 * (`who: what is wrong`), the usage, and exit code 2.
 */
export function wholeFlagOrExit(who: string, usage: string, name: string, raw: string | undefined, dflt: number): number {
  try {
    return raw === undefined ? dflt : whole(name, raw, 1, 10_000_000);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${who}: ${err.message}\n${usage}`);
    process.exit(2);
  }
}
