import client from "prom-client";
import { FastHistogram } from "./fast-histogram.ts";
import { TallyCounter } from "./tally-counter.ts";

/** prom-client default metrics left out (see the constructor). */
export const HEAP_SPACE_GAUGES = ["nodejs_heap_space_size_total_bytes", "nodejs_heap_space_size_used_bytes", "nodejs_heap_space_size_available_bytes"];

// Buckets from 1 ms to ~2 h: lag is milliseconds when healthy and hours in an outage.
const LAG_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 7200];

/**
 * The process's metrics. Counters and histograms count what this process did; the gauges
 * about jobs are read from the database at scrape time (see obs/job-gauges.ts), so any
 * process answers them the same. No job ids, URLs or tenants as label values.
 */
export class Metrics {
  readonly registry = new client.Registry();
  readonly deliveries = new TallyCounter({
    name: "scheduler_deliveries_total",
    help: "Webhook calls by classified outcome",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly schedulingLag = new FastHistogram({
    name: "scheduler_scheduling_lag_seconds",
    help: "Due instant to dispatcher claim",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly dispatchLag = new FastHistogram({
    name: "scheduler_dispatch_lag_seconds",
    help: "Dispatcher: start of due discovery to the claim committed (the job queued or handed to a worker)",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly retries = new TallyCounter({
    name: "scheduler_retries_total",
    help: "Failed calls scheduled for another try, by failure class (throttled, transient, unknown)",
    labelNames: ["class"] as const,
    registers: [this.registry],
  });
  readonly shardsOwned = new client.Gauge({ name: "scheduler_shards_owned", help: "Dispatch shards this process holds", registers: [this.registry] });
  readonly shardHandoffs = new client.Counter({
    name: "scheduler_shard_handoffs_total",
    help: "Dispatch shards this process acquired, released (fair share, stop) or lost (its lease lapsed and moved)",
    labelNames: ["kind"],
    registers: [this.registry],
  });
  readonly shardDispatched = new TallyCounter({
    name: "scheduler_shard_dispatched_total",
    help: "Jobs claimed by this process, by dispatch shard",
    labelNames: ["shard"] as const,
    registers: [this.registry],
  });
  readonly dispatchLeader = new client.Gauge({
    name: "scheduler_dispatch_leader",
    help: "1 while this process holds the dispatch lease (the dispatch leader of its region), else 0",
    registers: [this.registry],
  });
  readonly startLag = new FastHistogram({
    name: "scheduler_start_lag_seconds",
    help: "Due instant of an attempt to its call start",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly queueWait = new FastHistogram({
    name: "scheduler_queue_wait_seconds",
    help: "Dispatcher claim to call start",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly executionDuration = new FastHistogram({
    name: "scheduler_execution_duration_seconds",
    help: "Call start to answer",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly endToEnd = new FastHistogram({
    name: "scheduler_end_to_end_seconds",
    help: "Due instant to succeeded",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly dlqIngress = new client.Counter({ name: "scheduler_dlq_ingress_total", help: "Jobs that became dead", registers: [this.registry] });
  readonly dlqReplays = new client.Counter({
    name: "scheduler_dlq_replays_total",
    help: "Dead jobs put back to scheduled by a replay, by mode: single or bulk",
    labelNames: ["mode"],
    registers: [this.registry],
  });
  readonly leaseExpiries = new client.Counter({
    name: "scheduler_lease_expiries_total",
    help: "Claims recovered by the reaper after their lease passed",
    labelNames: ["state"],
    registers: [this.registry],
  });
  readonly duplicateAttempts = new client.Counter({
    name: "scheduler_duplicate_attempts_total",
    help: "Calls that may repeat an earlier delivery: late completions rejected and lost in-flight attempts retried",
    registers: [this.registry],
  });
  readonly outcomesUnrecorded = new client.Counter({
    name: "scheduler_outcomes_unrecorded_total",
    help: "Call outcomes that could not be written even row by row: the job is left to its lease and called again when it lapses (each is logged with its job id), by outcome",
    labelNames: ["outcome"],
    registers: [this.registry],
  });
  readonly staleDispatches = new client.Counter({
    name: "scheduler_stale_dispatches_total",
    help: "Claimed jobs not called because they were cancelled, rescheduled or reclaimed after the claim",
    registers: [this.registry],
  });
  readonly occurrences = new client.Counter({
    name: "scheduler_occurrences_total",
    help: "Schedule occurrences by result: generated, skipped_overlap, misfired",
    labelNames: ["result"],
    registers: [this.registry],
  });
  readonly generationRetries = new client.Counter({
    name: "scheduler_schedule_generation_retries_total",
    help: "Occurrence generation of a schedule (or a whole pass) undone by a transient database error (deadlock, lock or statement timeout, lost connection) and left to the next pass, by SQLSTATE or driver code",
    labelNames: ["code"],
    registers: [this.registry],
  });
  readonly authorityEpoch = new client.Gauge({
    name: "scheduler_authority_epoch",
    help: "Fencing epoch of the dispatch lease held by this process (0: not leader)",
    registers: [this.registry],
  });
  readonly indexFallback = new client.Gauge({
    name: "scheduler_index_fallback",
    help: "1 while the dispatcher discovers due jobs from SQL because the Redis due index is unavailable or not yet built; 0 while it uses the index (or none is configured)",
    registers: [this.registry],
  });
  readonly indexErrors = new client.Counter({
    name: "scheduler_index_errors_total",
    help: "Failed calls to the Redis due index, by operation",
    labelNames: ["op"],
    registers: [this.registry],
  });
  readonly indexRebuilds = new client.Counter({
    name: "scheduler_index_rebuilds_total",
    help: "Rebuilds of the Redis due index from SQL",
    registers: [this.registry],
  });
  readonly indexStale = new client.Counter({
    name: "scheduler_index_stale_entries_total",
    help: "Index entries dropped because SQL said the job was not due (cancelled, moved, claimed, unknown)",
    registers: [this.registry],
  });
  readonly indexReconciled = new client.Counter({
    name: "scheduler_index_reconciled_total",
    help: "Due jobs missing from the Redis index, found and claimed by the SQL reconciliation pass",
    registers: [this.registry],
  });
  readonly indexReconcileLate = new FastHistogram({
    name: "scheduler_index_reconcile_late_seconds",
    help: "How late (due instant to claim) the jobs the SQL reconciliation pass claimed were; compare with scheduler_index_reconcile_bound_seconds",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });
  readonly indexReconcileBound = new client.Gauge({
    name: "scheduler_index_reconcile_bound_seconds",
    help: "The bound on how late a due job missing from the Redis index is claimed by reconciliation (0.5 s + SCHEDULER_INDEX_RECONCILE, plus one dispatcher pass), while the dispatcher is not further behind than that",
    registers: [this.registry],
  });
  readonly regionHome = new client.Gauge({
    name: "scheduler_region_home",
    help: "1 while this process's region holds the region authority (home), 0 in a standby region",
    registers: [this.registry],
  });
  readonly authorityGeneration = new client.Gauge({
    name: "scheduler_authority_generation",
    help: "Failover generation of the region authority (the high half of every fencing token)",
    registers: [this.registry],
  });
  /** Read at scrape time (see callsInFlight): set per call, it cost two prom-client writes a job. */
  readonly inflight = new client.Gauge({
    name: "scheduler_worker_inflight",
    help: "Calls in flight in this process",
    registers: [this.registry],
    collect: () => {
      if (this.callsInFlight) this.inflight.set(this.callsInFlight());
    },
  });
  /** The worker in this process tells how many calls it has in flight (the gauge above reads it). */
  callsInFlight: (() => number) | undefined;
  readonly throttledHosts = new client.Gauge({
    name: "scheduler_throttled_hosts",
    help: "Target hosts this worker currently calls below their limit after 429/503 answers, or not at all until their Retry-After",
    registers: [this.registry],
  });
  readonly asyncHeartbeats = new client.Counter({
    name: "scheduler_async_heartbeats_total",
    help: "Heartbeats from the targets of async jobs, by result: ok, stale (older attempt or ended), refused (not a valid lease token), timed_out (past the execution ceiling)",
    labelNames: ["result"],
    registers: [this.registry],
  });
  readonly asyncTimeouts = new client.Counter({
    name: "scheduler_async_timeouts_total",
    help: "Async attempts ended because they ran past their timeout (execution ceiling)",
    registers: [this.registry],
  });
  readonly verifyChecks = new client.Counter({
    name: "scheduler_verify_checks_total",
    help: "Verify before retry: questions to a job's verify URL before calling again after an unknown outcome, by answer: processed (the job ended succeeded without another call), not_processed, error (no usable answer; the retry went ahead)",
    labelNames: ["result"],
    registers: [this.registry],
  });
  readonly verifyAvoidedCalls = new client.Counter({
    name: "scheduler_verify_avoided_calls_total",
    help: "Verify before retry: second calls not made because the target said it had processed the first",
    registers: [this.registry],
  });
  readonly hostDeferrals = new client.Counter({
    name: "scheduler_host_deferrals_total",
    help: "Calls held back because their target host was at its rate or concurrency limit, slowed or paused (each time a claimed job had to wait)",
    registers: [this.registry],
  });

  readonly pruned = new client.Counter({
    name: "scheduler_pruned_total",
    help: "Rows deleted by retention, by kind: a finished job status (succeeded, cancelled, expired, dead; attempts go with their job), payload, audit",
    labelNames: ["kind"],
    registers: [this.registry],
  });
  readonly testFaults = new client.Counter({
    name: "scheduler_test_faults_injected_total",
    help: "Test only (SCHEDULER_TEST_FAULTS): database errors injected before a named query, by query and SQLSTATE",
    labelNames: ["query", "code"],
    registers: [this.registry],
  });
  readonly authThrottled = new client.Counter({
    name: "scheduler_auth_throttled_total",
    help: "Requests answered 429 because their client failed to authenticate too often",
    registers: [this.registry],
  });

  constructor() {
    client.collectDefaultMetrics({ register: this.registry, prefix: "scheduler_process_" });
    // The per-space heap gauges call v8.getHeapSpaceStatistics(), which in Bun walks the whole
    // JS heap on the event loop: ~16 ms a scrape with 300,000 live objects, growing with the
    // heap, a stall of every call and claim each time Prometheus scrapes. The heap's size and
    // use stay (nodejs_heap_size_*, from process.memoryUsage(): microseconds).
    for (const name of HEAP_SPACE_GAUGES) this.registry.removeSingleMetric(`scheduler_process_${name}`);
  }
}
