// What a worker is given: its own file, so that the worker's parts (call line, claim intake)
// read the options without importing the worker itself.
import type { Db } from "../store/db.ts";
import type { ClaimedJob } from "../store/types.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import type { SigningKeyring } from "./signing-keyring.ts";
import type { DbClock } from "../time/db-clock.ts";

export interface WorkerOptions {
  db: Db;
  /** Lease owner token: unique per process. */
  owner: string;
  /** This process's region: the worker calls nothing unless it holds the region authority. */
  region: string;
  concurrency: number;
  /**
   * Jobs held claimed beyond the calls in flight, ready for the next free call slot, at most:
   * claims (and pre-call checks) are then paid per batch, not per freed slot. The worker
   * asks for as many as it calls in about PREFETCH_HORIZON_MS (slot-sizing.ts), never fewer than its
   * concurrency, never more than this.
   */
  prefetch?: number;
  /** A dispatcher in this process: told when the worker has room for a batch of due jobs. */
  onRoom?: () => void;
  leaseTtlMs: number;
  /**
   * The clock-skew margin: a call starts only on a lease live for at least this long, and is
   * aborted once its lease has gone unrenewed for leaseTtlMs minus this.
   */
  leaseMarginMs: number;
  /** Async jobs: the lease an accepted job runs under until its target's first heartbeat. */
  asyncLeaseMs: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  /** Signing keys per tenant and schedule (and the SCHEDULER_SIGNING_SECRET fallback), kept in memory. */
  keyring?: SigningKeyring;
  allowPrivateTargets: boolean;
  log: Logger;
  metrics: Metrics;
  /** Per-target-host limits (calls per second, calls in flight) and the slowdown floor; absent: unlimited. */
  hostLimits?: { ratePerSec?: number; concurrency?: number; floorPerSec?: number };
  /** Slots that serve only jobs of at least this priority (the rest serve any job). */
  reservedSlots?: { slots: number; minPriority: number };
  /** Pre-staging: also take queued jobs due this many ms from now, each held until due. */
  prestageMs?: number;
  /**
   * Test seam: runs between the claim and the pre-call check, to force races there (for jobs
   * a claim started, whose claim was their check, it runs before they are armed).
   */
  beforeStart?: (jobs: ClaimedJob[]) => Promise<void>;
  /**
   * Test seam: runs once the pre-call check's statement has answered; a throw here is a reply
   * lost after the commit (the client cannot tell whether it committed).
   */
  afterStartAttempts?: (jobIds: string[]) => Promise<void>;
  /** The database's clock, to plan when a claimed job's due instant comes (absent: the process clock). */
  clock?: DbClock;
}
