import pino from "pino";
import { LOG_SERIALIZERS } from "./log-redact.ts";

export type Logger = pino.Logger;

/** One JSON line per event on stdout; job events carry job_id. */
export function createLogger(p: { level: string; base?: Record<string, unknown> }): Logger {
  return pino({
    level: p.level,
    base: p.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Secrets never reach a log line: see log-redact.ts.
    serializers: LOG_SERIALIZERS,
  });
}

export const silentLogger: Logger = pino({ level: "silent" });
