import pino from "pino";
import type PinoPretty from "pino-pretty";
import { LOG_SERIALIZERS } from "./log-redact.ts";

export type Logger = pino.Logger;

/** json: one JSON line per event; pretty: one readable line per event; auto: pretty on a terminal. */
export type LogFormat = "auto" | "json" | "pretty";

/**
 * One JSON line per event on stdout; job events carry job_id. With format "pretty" (or "auto"
 * when stdout is a terminal) the same events as one readable line each, for a person.
 */
export function createLogger(p: { level: string; base?: Record<string, unknown>; format?: LogFormat; tty?: boolean }): Logger {
  const opts: pino.LoggerOptions = {
    level: p.level,
    base: p.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Secrets never reach a log line: see log-redact.ts.
    serializers: LOG_SERIALIZERS,
  };
  const format = p.format ?? "json";
  if (format === "json" || (format === "auto" && !p.tty)) return pino(opts);
  return pino({ ...opts, formatters: { ...opts.formatters, log: errorAsText } }, readableLines());
}

/**
 * pino-pretty as a stream in this thread (sync): no worker-thread transport, which the
 * compiled binary could not load from a file path. Loaded only here: JSON logging, and
 * every command that logs nothing, do not pay for its import at start-up (the bundler still
 * embeds it, the string being literal). Region and mode are the same on every line of a
 * process, so they are left out; a job's id leads its line.
 */
function readableLines() {
  const pretty = require("pino-pretty") as typeof PinoPretty;
  return pretty({
    sync: true,
    singleLine: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "region,mode,job_id",
    messageFormat: "{if job_id}job {job_id}: {end}{msg}",
    // "error" (a string, below) stays on the event's line.
    errorLikeObjectKeys: [],
  });
}

/**
 * An event's error as one line of text (name, code, message) under `error`: pino-pretty prints
 * an `err` object, with its stack, on lines of its own below the event whatever its options.
 * LOG_FORMAT=json keeps the stack.
 */
function errorAsText(o: Record<string, unknown>): Record<string, unknown> {
  if (!("err" in o)) return o;
  const { err, ...rest } = o;
  // Already through the err serializer (log-redact.ts): a plain object with type and message.
  const e = err as { name?: unknown; type?: unknown; code?: unknown; message?: unknown } | null;
  if (e === null || typeof e !== "object" || !("message" in e)) return { ...rest, error: String(err) };
  const name = err instanceof Error ? err.name : String(e.type ?? "Error");
  const code = e.code;
  return { ...rest, error: `${name}${code ? ` [${String(code)}]` : ""}: ${String(e.message)}`.replace(/\s*\n\s*/g, " ") };
}

export const silentLogger: Logger = pino({ level: "silent" });
