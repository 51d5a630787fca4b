import { hostname } from "node:os";
import type { Config } from "./config.ts";
import { createApp } from "./api/app.ts";
import { StatsHistory } from "./obs/stats-history.ts";
import { serve } from "./api/server.ts";
import { Dispatcher } from "./dispatcher/dispatcher.ts";
import { RetentionPruner } from "./dispatcher/retention-pruner.ts";
import { TableAnalyzer } from "./dispatcher/table-analyzer.ts";
import { IndexKeeper } from "./index/index-keeper.ts";
import { openIndex } from "./index/open-index.ts";
import { createLogger, type Logger } from "./obs/log.ts";
import { registerJobGauges } from "./obs/job-gauges.ts";
import { registerShardGauges } from "./obs/shard-gauges.ts";
import { gaugeSnapshots } from "./obs/gauge-snapshot.ts";
import { Metrics } from "./obs/metrics.ts";
import type { Db } from "./store/db.ts";
import { migrate } from "./store/migrate.ts";
import { databaseIsStandby, seedAuthority } from "./store/authority.ts";
import { RegionAuthority } from "./region/authority.ts";
import { openDb } from "./store/open.ts";
import { FaultSwitch, withTestFaults } from "./store/test-faults.ts";
import type { ClaimedJob, ClaimRow } from "./store/types.ts";
import { Worker } from "./worker/worker.ts";
import { SigningKeyring } from "./worker/signing-keyring.ts";
import { useDnsServers } from "./worker/target-guard.ts";
import { DbClock } from "./time/db-clock.ts";

export interface Runtime {
  config: Config;
  db: Db;
  log: Logger;
  metrics: Metrics;
  dispatcher?: Dispatcher;
  /** Retention of finished jobs, payloads (and audit, if asked): runs while this process leads dispatch. */
  pruner?: RetentionPruner;
  analyzer?: TableAnalyzer;
  /** The Redis due index's keeper, when REDIS_URL or Upstash is set and this process dispatches. */
  index?: IndexKeeper;
  authority?: RegionAuthority;
  worker?: Worker;
  /** Signing keys in memory (worker mode). */
  keyring?: SigningKeyring;
  /** Backlog and throughput samples for the dashboard (api mode). */
  history?: StatsHistory;
  server?: ReturnType<typeof serve>;
  /** The address the HTTP server listens on, e.g. http://127.0.0.1:8080. */
  url?: string;
  stop(): Promise<void>;
}

export interface StartOptions {
  db?: Db;
  log?: Logger;
  /** Test seam, see WorkerOptions.beforeStart. */
  beforeStart?: (jobs: ClaimedJob[]) => Promise<void>;
  /** Test seam, see WorkerOptions.afterStartAttempts. */
  afterStartAttempts?: (jobIds: string[]) => Promise<void>;
  /** Test seam, see DispatcherOptions.afterClaim. */
  afterClaim?: (jobs: ClaimedJob[]) => Promise<void>;
  /** Test seam, see DueClaimerOptions.afterClaimReply. */
  afterClaimReply?: (jobs: ClaimRow[]) => Promise<void>;
  /** Test seam, see DueClaimerOptions.onRun. */
  onRun?: (ids: string[]) => void;
  /** Test seam, see DueClaimerOptions.aheadMaxAgeMs. */
  aheadMaxAgeMs?: number;
  /** Test seam, see DispatcherOptions.notSeenWaitMs. */
  notSeenWaitMs?: number;
  /** Aborts a start that is still waiting (for a standby database to be promoted). */
  signal?: AbortSignal;
  /** Test-only: arms and disarms SCHEDULER_TEST_FAULTS (main.ts toggles it on SIGUSR2). */
  faultSwitch?: FaultSwitch;
}

/** Opens the database, migrates, and starts what the mode asks for. */
export async function startRuntime(config: Config, opts: StartOptions = {}): Promise<Runtime> {
  const owner = `${hostname()}/${process.pid}/${Math.random().toString(36).slice(2, 8)}`;
  // Process-wide like dns.setServers: the API's creation check and the worker's calls must
  // resolve target names the same way.
  useDnsServers(config.dnsServers);
  const log = opts.log ?? createLogger({ level: config.logLevel, base: { region: config.region, mode: config.mode } });
  const opened =
    opts.db ??
    (await openDb(
      config,
      `scheduler-${config.mode}`,
      (err) => log.warn({ err }, "the bundled PGlite data directory could not be resumed; running initdb instead (slower, about 1 GB of memory once)"),
      (message) => log.warn({}, message),
    ));
  const ownsDb = !opts.db;
  try {
    await waitUntilWritable(opened, log, opts.signal);
    const { applied } = await migrate(opened, {
      onRetry: (info) => log.warn(info, "a migration waited too long for a table another transaction holds; its transaction was undone and is tried again"),
    });
    if (applied.length > 0) log.info({ applied }, "migrations applied");
    await seedAuthority(opened, config.homeRegion, config.authorityTtlMs);
  } catch (err) {
    if (ownsDb) await opened.close();
    throw err;
  }
  const metrics = new Metrics();
  // Test-only: the start-up itself runs clean; everything after it may meet injected errors.
  const faultSwitch = opts.faultSwitch ?? new FaultSwitch(config.testFaultsArmed);
  const db = withTestFaults(opened, config.testFaults, { switch: faultSwitch, onInject: (query, code) => metrics.testFaults.inc({ query, code }) });
  if (config.testFaults.length > 0) {
    log.warn(
      { faults: config.testFaults, armed: faultSwitch.armed },
      "SCHEDULER_TEST_FAULTS is set: named queries fail on purpose with injected database errors (while armed; SIGUSR2 arms and disarms them); a test-only setting, never for production",
    );
  }
  const gauges = gaugeSnapshots(db, { shards: config.shards });
  registerJobGauges(metrics, gauges);
  registerShardGauges(metrics, gauges, { shards: config.shards, log });
  const rt: Runtime = { config, db, log, metrics, stop: async () => {} };
  const want = (m: string) => config.mode === "all" || config.mode === m;
  // Every process follows the region authority: the API for fly-replay and /v1/cluster,
  // workers and dispatchers to work only while their region is home. Dispatchers also renew
  // it (as leader) or take it over (as a standby, when it lapses).
  rt.authority = new RegionAuthority({
    db,
    region: config.region,
    owner,
    ttlMs: config.authorityTtlMs,
    skewMs: config.clockSkewMs,
    autoFailover: config.autoFailover,
    acts: want("dispatcher"),
    log,
    metrics,
    isLeader: () => rt.dispatcher?.isLeading() ?? false,
    onChange: () => {
      rt.dispatcher?.authorityChanged();
      rt.worker?.poke();
    },
  });
  await rt.authority.begin();
  // The database's clock, as this process measures it: wake-ups are planned on it, so a
  // process clock that is off makes nothing early (SQL decides) and nothing a skew late.
  const clock = new DbClock(db);
  if (want("dispatcher") || want("worker")) await clock.start((err) => log.warn({ err }, "reading the database's clock failed; keeping the last offset"));
  const dispatchHere = want("dispatcher");
  const workHere = want("worker");
  if (workHere) {
    // Keys first: a worker does not call before it knows what to sign with.
    rt.keyring = new SigningKeyring({ db, log, fallback: config.signingKey, refreshMs: config.signingKeysRefreshMs, now: () => clock.now() });
    await rt.keyring.begin();
    rt.worker = new Worker({
      db,
      owner,
      region: config.region,
      concurrency: config.workerConcurrency,
      leaseTtlMs: config.leaseTtlMs,
      leaseMarginMs: config.clockSkewMs,
      asyncLeaseMs: config.asyncLeaseMs,
      pollIntervalMs: config.pollIntervalMs,
      shutdownGraceMs: config.shutdownGraceMs,
      keyring: rt.keyring,
      allowPrivateTargets: config.allowPrivateTargets,
      log,
      metrics,
      beforeStart: opts.beforeStart,
      afterStartAttempts: opts.afterStartAttempts,
      hostLimits: config.hostLimits,
      prestageMs: config.prestageMs,
      reservedSlots: config.reservedSlots,
      clock,
      prefetch: config.workerPrefetch,
      // Room for a batch: the dispatcher in this process claims it (straight into running).
      onRoom: () => rt.dispatcher?.poke(),
    });
    await rt.worker.start();
  }
  if (dispatchHere) {
    if (config.redisUrl || config.upstash) {
      rt.index = new IndexKeeper({
        db,
        index: openIndex(config, db),
        windowMs: config.index.windowMs,
        reconcileMs: config.index.reconcileMs,
        log,
        metrics,
        onDue: (at) => rt.dispatcher?.noteJobDue(at),
        clock,
      });
      log.info({ index: rt.index.kind, window_ms: config.index.windowMs }, "due index: Redis, validated in SQL, SQL fallback");
    }
    rt.dispatcher = new Dispatcher({
      db,
      owner,
      batch: config.dispatchBatch,
      leaderTtlMs: config.leaderTtlMs,
      leaseTtlMs: config.leaseTtlMs,
      skewMs: config.clockSkewMs,
      pollIntervalMs: config.pollIntervalMs,
      log,
      metrics,
      localWorker: rt.worker,
      catchupPerSecond: config.catchupPerSecond,
      prestageMs: config.prestageMs,
      occurrenceLeadMs: config.occurrenceLeadMs,
      reservedSlots: config.reservedSlots,
      shards: config.shards,
      index: rt.index,
      authority: rt.authority,
      flow: config.flow,
      afterClaim: opts.afterClaim,
      afterClaimReply: opts.afterClaimReply,
      onRun: opts.onRun,
      aheadMaxAgeMs: opts.aheadMaxAgeMs,
      notSeenWaitMs: opts.notSeenWaitMs,
      clock,
      // A new leader renews the region authority at once, not a third of a TTL later.
      onLeadership: (leading) => {
        if (leading) rt.authority?.poke();
      },
    });
    await rt.dispatcher.begin();
    rt.pruner = new RetentionPruner({ db, retention: config.retention, log, metrics, isLeader: () => rt.dispatcher?.isLeading() ?? false });
    rt.pruner.start();
    rt.analyzer = new TableAnalyzer({ db, log, isLeader: () => rt.dispatcher?.isLeading() ?? false });
    rt.analyzer.start();
  }
  const home = rt.authority.current?.homeRegion;
  if ((want("dispatcher") || want("worker")) && home !== config.region) {
    log.info({ home_region: home }, "standby region: not dispatching or executing while the home region holds the authority");
  }
  if (want("api")) {
    // 10 s samples for an hour: the dashboard's charts.
    rt.history = new StatsHistory({ db, log, intervalMs: config.statsIntervalMs, keep: Math.ceil(3_600_000 / config.statsIntervalMs) });
    rt.history.start();
  }
  const app = createApp({ db, config, metrics, log, serveApi: want("api"), authority: rt.authority, history: rt.history });
  rt.server = serve(app, { host: config.host, port: config.port });
  rt.url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${rt.server.port}`;
  if (want("api") && config.tokens.length === 0) {
    log.warn("no SCHEDULER_TOKENS set: the API serves loopback clients only");
  }
  log.info({ url: rt.url, owner, database: db.kind }, "scheduler started");

  let stopping: Promise<void> | undefined;
  rt.stop = () =>
    (stopping ??= (async () => {
      log.info("stopping");
      // Each step runs even if an earlier one failed: the worker must drain and the
      // database close whatever happened to the HTTP server or the dispatcher.
      const steps: [string, () => Promise<unknown> | undefined][] = [
        ["http server", () => rt.server?.stop()],
        ["stats history", () => rt.history?.stop()],
        ["retention pruner", () => rt.pruner?.stop()],
        ["table analyzer", () => rt.analyzer?.stop()],
        ["dispatcher", () => rt.dispatcher?.end()],
        ["due index", () => rt.index?.close()],
        ["region authority", () => rt.authority?.end()],
        ["worker", () => rt.worker?.stop()],
        ["signing keyring", () => rt.keyring?.end()],
        ["database clock", () => void clock.stop()],
        ["database", () => (ownsDb ? db.close() : undefined)],
      ];
      let failed: unknown;
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (err) {
          failed ??= err;
          log.error({ err, step: name }, "stopping a part failed");
        }
      }
      if (failed) throw failed;
      log.info("stopped");
    })());
  return rt;
}

/**
 * A standby region's database may be a read-only replica until its promotion: wait for it
 * (warm, connected), then start. Logged once; a stop request ends the wait.
 */
async function waitUntilWritable(db: Db, log: Logger, signal?: AbortSignal): Promise<void> {
  let said = false;
  while (await databaseIsStandby(db)) {
    if (!said) log.info("database is read-only (a standby): waiting for it to be promoted");
    said = true;
    if (signal?.aborted) throw new StartAborted();
    await new Promise((r) => setTimeout(r, 250));
  }
  if (said) log.info("database promoted: starting");
}

export class StartAborted extends Error {
  constructor() {
    super("stopped before the start completed");
    this.name = "StartAborted";
  }
}
