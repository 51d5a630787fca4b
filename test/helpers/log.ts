/** A logger that keeps its JSON lines in memory, for tests that assert what was logged. */
import pino from "pino";
import type { Logger } from "../../src/obs/log.ts";
import { LOG_SERIALIZERS } from "../../src/obs/log-redact.ts";

export interface MemoryLog {
  log: Logger;
  lines: Record<string, unknown>[];
  /** Lines whose msg contains `text`. */
  find(text: string): Record<string, unknown>[];
}

export function memoryLogger(level = "debug"): MemoryLog {
  const lines: Record<string, unknown>[] = [];
  // The production logger's redaction (src/obs/log.ts), so tests see what operators see.
  const log = pino(
    {
      level,
      base: {},
      formatters: { level: (label) => ({ level: label }) },
      serializers: LOG_SERIALIZERS,
    },
    {
      write(s: string) {
        lines.push(JSON.parse(s) as Record<string, unknown>);
      },
    },
  );
  return { log, lines, find: (text) => lines.filter((l) => String(l.msg ?? "").includes(text)) };
}
