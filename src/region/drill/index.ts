/**
 * `scheduler drill failover`: a real local region-failover drill (see DRILL_HELP, drill.ts).
 * main.ts calls drillMain with the arguments after `drill` and how to start a scheduler.
 */
import { writeFileSync } from "node:fs";
import { DRILL_HELP, DrillUsageError, parseDrillArgs } from "./args.ts";
import { Cleanup } from "./cleanup.ts";
import { runFailoverDrill } from "./drill.ts";
import { formatReport } from "./report.ts";

export { runFailoverDrill } from "./drill.ts";
export { DEFAULT_TIMINGS, type DrillTimings, type FailoverDrillOptions } from "./settings.ts";
export type { DrillReport } from "./report.ts";
export { DRILL_HELP, parseDrillArgs } from "./args.ts";

/**
 * Parses `[failover] --jobs=N --sync --json=FILE --pg-bin=DIR --help`, runs the drill,
 * prints progress to stderr and the report table to stdout, writes the JSON report when
 * asked. Returns the exit code: 0 passed, 1 failed, 2 bad usage; on SIGINT/SIGTERM it
 * removes everything it started and exits 130/143 itself.
 */
export async function drillMain(argv: string[], schedulerCommand: string[]): Promise<number> {
  let args;
  try {
    args = parseDrillArgs(argv);
  } catch (err) {
    if (!(err instanceof DrillUsageError)) throw err;
    process.stderr.write(`scheduler drill: ${err.message}; see scheduler drill failover --help\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(DRILL_HELP);
    return 0;
  }
  if (schedulerCommand.length === 0) {
    process.stderr.write("scheduler drill: no command to start a scheduler with\n");
    return 2;
  }

  const cleanup = new Cleanup();
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (interrupted) {
      cleanup.runSync();
      process.exit(sig === "SIGINT" ? 130 : 143);
    }
    interrupted = true;
    process.stderr.write(`drill: ${sig}: stopping every process the drill started and removing its files\n`);
    cleanup.interrupt().finally(() => process.exit(sig === "SIGINT" ? 130 : 143));
  };
  const onInt = () => onSignal("SIGINT");
  const onTerm = () => onSignal("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  try {
    const report = await runFailoverDrill({
      jobs: args.jobs,
      sync: args.sync,
      pgBin: args.pgBin,
      schedulerCommand,
      cleanup,
      progress: (line) => process.stderr.write(`${line}\n`),
    });
    if (args.json) {
      try {
        writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`);
      } catch (err) {
        process.stderr.write(`scheduler drill: cannot write ${args.json}: ${(err as Error).message}\n`);
        return 1;
      }
    }
    // Nothing ran (no PostgreSQL, say): the one-line reason is the useful output.
    if (report.error && !("schedulers" in report.phases_ms)) {
      process.stderr.write(`scheduler drill: ${report.error}${report.logs_dir ? `\n(logs kept in ${report.logs_dir})` : ""}\n`);
      return 1;
    }
    process.stdout.write(formatReport(report));
    return report.passed ? 0 : 1;
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
}
