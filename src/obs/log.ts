import pino from "pino";
import { REDACT_PATHS, serializeError } from "./log-redact.ts";

export type Logger = pino.Logger;

/** One JSON line per event on stdout; job events carry job_id. */
export function createLogger(p: { level: string; base?: Record<string, unknown> }): Logger {
  return pino({
    level: p.level,
    base: p.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Secrets never reach a log line: see log-redact.ts.
    serializers: { err: serializeError, error: serializeError, cause: serializeError },
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
  });
}

export const silentLogger: Logger = pino({ level: "silent" });
