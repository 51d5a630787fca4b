import { parseArgs } from "node:util";

export const DRILL_HELP = `scheduler drill failover — a real local region-failover drill

Usage:
  scheduler drill failover [--jobs=N] [--sync] [--json=FILE] [--pg-bin=DIR]

Starts, on loopback and in a temp dir removed at the end: a PostgreSQL primary and a
streaming standby (pg_basebackup -R), a recording webhook target, region "a" (two scheduler
processes on the primary) and region "b" (one on the standby). Creates N one-off jobs and an
every-second schedule through the home region's API, kills region "a" (SIGKILL, primary
stopped -m immediate) after about a third are acknowledged, promotes the standby and lets
region "b" take the authority over by itself. Then restarts the old primary with region
"a" on it (split brain at the database layer) and checks that the target refuses its calls
by their older fencing token.

Options:
  --jobs=N       one-off jobs to create (default 200)
  --sync         synchronous replication: acknowledged writes are on the standby (RPO 0).
                 Without it a few acknowledged jobs may be lost, and the drill says so.
  --json=FILE    also write the report as JSON to FILE
  --pg-bin=DIR   PostgreSQL server binaries (initdb, pg_ctl, postgres, pg_basebackup);
                 default: $PG_BIN, else initdb on PATH, else the newest /usr/lib/postgresql/*/bin
  --help         this text

Exit code 0 only when the drill passed: nothing acknowledged lost, no duplicate accepted,
no call early, no call from the old region accepted, misfire policy kept.
`;

export interface DrillArgs {
  jobs: number;
  sync: boolean;
  json?: string;
  pgBin?: string;
  help: boolean;
}

export class DrillUsageError extends Error {
  override readonly name = "DrillUsageError";
}

/** argv after `drill failover` (a leading "failover" positional is accepted and ignored). */
export function parseDrillArgs(argv: string[]): DrillArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        jobs: { type: "string" },
        sync: { type: "boolean" },
        json: { type: "string" },
        "pg-bin": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    throw new DrillUsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  const extra = positionals.filter((p, i) => !(i === 0 && p === "failover"));
  if (extra.length > 0) throw new DrillUsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  let jobs = 200;
  if (values.jobs !== undefined) {
    if (!/^\d+$/.test(values.jobs)) throw new DrillUsageError(`--jobs must be a whole number from 1 to 100000 (got ${JSON.stringify(values.jobs)})`);
    jobs = Number(values.jobs);
    if (jobs < 1 || jobs > 100_000) throw new DrillUsageError(`--jobs must be a whole number from 1 to 100000 (got ${jobs})`);
  }
  if (values.json !== undefined && values.json === "") throw new DrillUsageError("--json needs a file name");
  if (values["pg-bin"] !== undefined && values["pg-bin"] === "") throw new DrillUsageError("--pg-bin needs a directory");
  return { jobs, sync: values.sync ?? false, json: values.json, pgBin: values["pg-bin"], help: values.help ?? false };
}
