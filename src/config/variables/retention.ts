// The variables of the section "Retention" (how long finished work is kept): see ../variables.ts.
import { duration, int, retention } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const RETENTION = {
  SCHEDULER_RETENTION_SUCCEEDED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "keep succeeded jobs this long; `off` or `0`: for ever",
  },
  SCHEDULER_RETENTION_CANCELLED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for cancelled jobs",
  },
  SCHEDULER_RETENTION_EXPIRED: {
    schema: retention,
    default: "7d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for expired jobs",
  },
  SCHEDULER_RETENTION_DEAD: {
    schema: retention,
    default: "30d",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for dead jobs",
  },
  SCHEDULER_RETENTION_AUDIT: {
    schema: retention,
    default: "off",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "the same, for the audit log",
  },
  SCHEDULER_RETENTION_PAYLOAD_GRACE: {
    schema: duration(0),
    default: "1h",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "unreferenced payloads are kept this long after last use",
  },
  SCHEDULER_RETENTION_INTERVAL: {
    schema: duration(100),
    default: "1m",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "pruning pass interval",
  },
  SCHEDULER_RETENTION_BATCH: {
    schema: int(1, 100_000),
    default: "500",
    section: "Retention",
    readBy: ["dispatcher"],
    doc: "rows deleted per statement",
  },
} as const satisfies Record<string, Variable>;
