#!/usr/bin/env bun
import { parseArgs } from "node:util";
import pkg from "../package.json" with { type: "json" };
import { ConfigError, loadConfig, type Config } from "./config.ts";
import { helpEnvironment } from "./config/docs.ts";
import { openIndex } from "./index/open-index.ts";
import { rebuildIndex } from "./index/index-rebuild.ts";
import { createLogger } from "./obs/log.ts";
import { installProcessGuards } from "./obs/process-guards.ts";
import { startRuntime, StartAborted, type Runtime } from "./runtime.ts";
import { DataDirLockedError } from "./store/dir-lock.ts";
import { migrate } from "./store/migrate.ts";
import { openDb } from "./store/open.ts";
import type { Db } from "./store/db.ts";
import { FaultSwitch } from "./store/test-faults.ts";
import { hostname, userInfo } from "node:os";
import { AuthorityMoveRefused, moveAuthority } from "./store/authority.ts";
import { drillMain } from "./region/drill/index.ts";
import { fetchStats, renderStatus, StatusError, verdict } from "./obs/status-screen.ts";
import { applyTestClockOffset } from "./time/test-clock.ts";
import { isResourceCommand, runCli } from "./kit/cli/cli.ts";

const HELP = `scheduler ${pkg.version} — durable scheduler for HTTP webhook jobs

Usage:
  scheduler [--mode=all|api|dispatcher|worker] [--port=N] [--region=R]
  scheduler migrate          apply the SQL migrations, then exit
  scheduler index rebuild    rebuild the Redis due-time index from SQL (REDIS_URL or UPSTASH_*)
  scheduler failover --to=REGION [--reason=TEXT]
                             move the region authority (fenced: generation + 1, audited)
  scheduler drill failover [--jobs=N] [--sync] [--json=FILE]
                             a real local failover drill; exit 0 only if nothing was lost or duplicated
  scheduler status [--url=http://host:8080] [--token=T] [--json]
                             health on one screen (exit 1 when something needs attention)
  scheduler jobs create|get|list|cancel          the API from the command line
  scheduler schedules create|list|pause|resume|preview   (--url, --token, -o json|table;
  scheduler dlq list|replay                       scheduler jobs --help for each one's flags)
  scheduler --help | --version

Examples:
  scheduler                                   # everything in one process, embedded database in ./data
  DATABASE_URL=postgres://localhost/sched scheduler --mode=api --port=8080
  DATABASE_URL=postgres://localhost/sched scheduler --mode=worker
  DATABASE_URL=postgres://localhost/sched scheduler migrate
  DATABASE_URL=postgres://… scheduler failover --to=fra --reason="iad is down"
  scheduler drill failover --jobs=200 --sync --json=drill.json
  SCHEDULER_TOKEN=… scheduler status --url=https://sched.fly.dev
  scheduler jobs create --target=https://example.com/hook --body='{"n":1}' --delay=30s
  scheduler jobs list --status=dead -o json
  scheduler schedules preview daily-report --count=5

  curl -X POST localhost:8080/v1/jobs -H 'content-type: application/json' \\
    -d '{"target":{"url":"https://example.com/hook","body":{"hello":"world"}},"delay":"30s"}'

${helpEnvironment()}`;

/** migrate() for a command on a terminal: each retry behind another transaction's lock says so. */
function cliMigrate(db: Db): Promise<{ applied: string[] }> {
  return migrate(db, {
    onRetry: ({ migration, nextTry, tries }) =>
      process.stderr.write(`scheduler: migration ${migration} waited too long for a table another transaction holds; trying again (${nextTry} of ${tries})\n`),
  });
}

/** Each line of the message on a line of its own (a ConfigError has one per problem). */
function fail(message: string): never {
  process.stderr.write(
    message
      .split("\n")
      .map((line) => `scheduler: ${line}\n`)
      .join(""),
  );
  process.exit(2);
}

async function main(argv: string[]): Promise<void> {
  // The API's resources from the command line (over scheduler/client): flags of their own.
  if (isResourceCommand(argv)) {
    process.exit(
      await runCli(argv, {
        out: (s) => process.stdout.write(s),
        err: (s) => process.stderr.write(s),
        env: process.env,
        readStdin: () => new Response(Bun.stdin.stream()).text(),
      }),
    );
  }
  // The drill has options of its own; it starts scheduler processes with this same program.
  if (argv[0] === "drill") {
    if (argv[1] !== "failover") fail(`unknown drill ${JSON.stringify(argv[1] ?? "")}; the drill is: scheduler drill failover`);
    process.exit(await drillMain(argv.slice(2), selfCommand()));
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        mode: { type: "string" },
        port: { type: "string" },
        region: { type: "string" },
        to: { type: "string" },
        reason: { type: "string" },
        url: { type: "string" },
        token: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        version: { type: "boolean", short: "v" },
      },
    });
  } catch (err) {
    fail(`${(err as Error).message}; see scheduler --help`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  if (values.version) {
    process.stdout.write(`${pkg.version}\n`);
    return;
  }
  if (positionals.join(" ") === "status") {
    // Talks to a running scheduler's API: no database settings needed here.
    const url = values.url ?? process.env.SCHEDULER_URL ?? `http://127.0.0.1:${process.env.PORT ?? 8080}`;
    try {
      const stats = await fetchStats(url, values.token ?? process.env.SCHEDULER_TOKEN);
      process.stdout.write(values.json ? `${JSON.stringify(stats, null, 2)}\n` : renderStatus(url, stats));
      process.exit(verdict(stats).length === 0 ? 0 : 1);
    } catch (err) {
      if (err instanceof StatusError) fail(err.message);
      throw err;
    }
  }
  let config;
  try {
    config = loadConfig(process.env, { mode: values.mode, port: values.port, region: values.region });
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  // Before anything reads the clock: every wall-clock read of this process is skewed.
  applyTestClockOffset(config.testClockOffsetMs);
  const command = positionals.join(" ");
  if (command === "migrate") {
    const db = await openDb(config, "scheduler-migrate");
    try {
      const { applied } = await cliMigrate(db);
      process.stdout.write(applied.length ? `applied: ${applied.join(", ")}\n` : "database is up to date\n");
    } finally {
      await db.close();
    }
    return;
  }
  if (command === "index rebuild") {
    await indexRebuild(config);
    return;
  }
  if (command === "failover") {
    await failover(config, values.to, values.reason);
    return;
  }
  if (command !== "") fail(`unknown command ${JSON.stringify(command)}; see scheduler --help`);

  const log = createLogger({ level: config.logLevel, format: config.logFormat, tty: process.stdout.isTTY, base: { region: config.region, mode: config.mode } });
  installProcessGuards(log);
  if (config.testClockOffsetMs !== 0) {
    log.warn(
      { offset_ms: config.testClockOffsetMs },
      "SCHEDULER_TEST_CLOCK_OFFSET_MS is set: this process's clock is shifted on purpose; a test-only setting, never for production",
    );
  }
  // Handlers first: a stop requested while the database is still being created must not
  // kill the process half-way.
  let rt: Runtime | undefined;
  let signals = 0;
  let pendingSignal: string | undefined;
  const stop = (r: Runtime, sig: string) => {
    log.info({ signal: sig }, "graceful stop: no new work, finishing calls in flight");
    r.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, "stop failed");
        process.exit(1);
      },
    );
  };
  const onSignal = (sig: string) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal: sig }, "second signal: exiting now; leases will lapse and other workers take over");
      process.exit(1);
    }
    // During start-up (the embedded database may be mid-creation): stop once started; a
    // start still waiting for a standby database to be promoted ends at once.
    if (!rt) {
      pendingSignal = sig;
      starting.abort();
    } else stop(rt, sig);
  };
  const starting = new AbortController();
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  // Test-only: SIGUSR2 arms or disarms the injected faults of a running process. Listened to
  // only when there are faults (else the signal keeps its default action), and from the start.
  const faultSwitch = new FaultSwitch(config.testFaultsArmed);
  if (config.testFaults.length > 0) {
    process.on("SIGUSR2", () => log.info({ armed: faultSwitch.toggle() }, "SCHEDULER_TEST_FAULTS toggled by SIGUSR2"));
  }
  try {
    rt = await startRuntime(config, { log, signal: starting.signal, faultSwitch });
  } catch (err) {
    if (err instanceof StartAborted) {
      log.info("stopped while waiting to start");
      process.exit(0);
    }
    throw err;
  }
  if (pendingSignal) stop(rt, pendingSignal);
}

async function indexRebuild(config: Config): Promise<void> {
  if (!config.redisUrl && !config.upstash)
    fail("index rebuild needs REDIS_URL, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN: without them the SQL index is used, which needs no rebuild");
  const db = await openDb(config, "scheduler-index-rebuild");
  const index = openIndex(config, db);
  try {
    await cliMigrate(db);
    if (!(await index.ping())) fail(`cannot reach the ${index.kind} index; check REDIS_URL / UPSTASH_REDIS_REST_URL`);
    const t = performance.now();
    const { loaded, loadedUntil } = await rebuildIndex({ db, index, windowMs: config.index.windowMs, batch: 5000 });
    process.stdout.write(`index rebuilt: ${loaded} jobs due before ${new Date(loadedUntil).toISOString()} in ${Math.round(performance.now() - t)} ms\n`);
  } finally {
    await index.close();
    await db.close();
  }
}

async function failover(config: Config, to: string | undefined, reason: string | undefined): Promise<void> {
  if (!to) fail('failover needs --to=REGION, the region that becomes home, e.g. scheduler failover --to=fra --reason="iad is down"');
  if (!/^[a-z0-9-]{1,32}$/.test(to)) fail(`--to must be a region name like iad or local (got ${JSON.stringify(to)})`);
  const db = await openDb(config, "scheduler-failover");
  try {
    await cliMigrate(db);
    const actor = `cli:${userInfo().username}@${hostname()}`;
    let moved;
    try {
      moved = await moveAuthority(db, { to, ttlMs: config.authorityTtlMs, action: "cluster.failover", by: { actor, reason: reason ?? null } });
    } catch (err) {
      if (err instanceof AuthorityMoveRefused) fail(`failover refused: ${err.message}`);
      throw err;
    }
    process.stdout.write(
      `region authority moved: ${moved.from} → ${moved.to}, generation ${moved.generation}` +
        ` (every token from now on is above ${moved.generation * 2 ** 32 - 1}); ${moved.requeued} queued jobs handed back\n` +
        `${moved.from}'s dispatchers and workers stop claiming at once; calls already in flight there finish.\n`,
    );
  } finally {
    await db.close();
  }
}

/** How to start this same program: the compiled binary alone, or bun with this script. */
function selfCommand(): string[] {
  return Bun.main.startsWith("/$bunfs/") || Bun.main.startsWith("B:/~BUN/") ? [process.execPath] : [process.execPath, Bun.main];
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof DataDirLockedError) fail(err.message);
  const code = (err as { code?: string })?.code;
  if (code === "ECONNREFUSED") fail(`cannot reach the database at DATABASE_URL (connection refused); is PostgreSQL running?`);
  // Bun's own words name the port ("Failed to start server. Is port 8080 in use?"); say what to do.
  if (code === "EADDRINUSE")
    fail(`${(err as Error).message} Another program (or another scheduler) listens there: stop it, or pick another port with PORT=8081 or --port=8081.`);
  fail(`${(err as Error)?.message ?? String(err)}`);
});
