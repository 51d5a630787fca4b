// The variables of the section "Storage, HTTP and logs" (where state lives, the HTTP port, logs): see ../variables.ts.
import * as v from "valibot";
import { int, nonEmpty } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const STORAGE = {
  DATABASE_URL: {
    schema: v.pipe(v.string(), v.regex(/^postgres(ql)?:\/\//, "must start with postgres:// or postgresql://")),
    section: "Storage, HTTP and logs",
    readBy: "all",
    url: true,
    doc: "PostgreSQL (`postgres://…`); unset: embedded PGlite in `SCHEDULER_DATA_DIR`",
  },
  SCHEDULER_DATA_DIR: {
    schema: nonEmpty,
    default: "./data",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "embedded database directory; locked, one process at a time",
  },
  PORT: {
    schema: int(0, 65535),
    default: "8080",
    flag: "port",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "HTTP port (`--port` overrides it)",
    more: "; every mode serves `/healthz`, `/readyz`, `/metrics`",
  },
  HOST: {
    schema: nonEmpty,
    default: "0.0.0.0",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "HTTP listen address",
  },
  LOG_LEVEL: {
    schema: v.picklist(["trace", "debug", "info", "warn", "error", "fatal", "silent"], "must be one of trace, debug, info, warn, error, fatal, silent"),
    default: "info",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "`trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`",
    more: "; JSON lines carry `job_id` on job events",
  },
  LOG_FORMAT: {
    schema: v.picklist(["auto", "json", "pretty"], "must be one of auto, json, pretty"),
    default: "auto",
    section: "Storage, HTTP and logs",
    readBy: "all",
    doc: "`auto`: readable lines on a terminal, JSON lines otherwise; or `json`, `pretty`",
    more: " (see [Logs](#logs))",
  },
} as const satisfies Record<string, Variable>;
