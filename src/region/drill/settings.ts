/** What a drill run is told: its timings, its options, and the scheduler processes' settings. */
import type { Cleanup } from "./cleanup.ts";

export interface DrillTimings {
  /** Job i is first tried at i × loadWindowMs / jobs after the load starts. */
  loadWindowMs: number;
  /** Due times: this long after a job's first create attempt, spread evenly. */
  minDueMs: number;
  maxDueMs: number;
  /** A scheduler process must log "scheduler started" within this. */
  startTimeoutMs: number;
  /** After promotion, region B must log "took over region authority" within this. */
  takeoverTimeoutMs: number;
  /** Every acknowledged job must be accepted by this long after the last due time. */
  drainGraceMs: number;
  /** How long the old home gets to make a first call once it runs again. */
  oldRegionWaitMs: number;
  /** After its first call, how much longer its calls are collected. */
  oldRegionExtraMs: number;
}

export const DEFAULT_TIMINGS: DrillTimings = {
  loadWindowMs: 8000,
  minDueMs: 1000,
  maxDueMs: 15_000,
  startTimeoutMs: 30_000,
  takeoverTimeoutMs: 30_000,
  drainGraceMs: 60_000,
  oldRegionWaitMs: 10_000,
  oldRegionExtraMs: 1500,
};

export interface FailoverDrillOptions {
  jobs: number;
  sync: boolean;
  pgBin?: string;
  /** How to start a scheduler process, e.g. [bun, "src/main.ts"] or [the compiled binary]. */
  schedulerCommand: string[];
  /** One progress line per phase (drillMain: stderr). */
  progress?: (line: string) => void;
  /** Where undo steps go; drillMain passes its own so SIGINT can run them. */
  cleanup?: Cleanup;
  timings?: Partial<DrillTimings>;
  /** Environment to read PG_BIN and PATH from (default process.env). */
  env?: Record<string, string | undefined>;
}

/** The settings every scheduler process of the drill runs with (short timings). */
export const SCHEDULER_ENV: Record<string, string> = {
  HOME_REGION: "a",
  HOST: "127.0.0.1",
  SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
  // The drill's schedule fires every second (the default minimum is 10 s).
  SCHEDULER_MIN_SCHEDULE_INTERVAL: "1s",
  LOG_LEVEL: "info",
  SCHEDULER_LEADER_TTL: "2s",
  SCHEDULER_AUTHORITY_TTL: "2s",
  SCHEDULER_LEASE_TTL: "3s",
  SCHEDULER_CLOCK_SKEW: "500ms",
  SCHEDULER_POLL_INTERVAL: "200ms",
  SCHEDULER_AUTO_FAILOVER: "1",
};
