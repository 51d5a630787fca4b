import type { Config } from "../config.ts";
import type { Db } from "./db.ts";
import { openPglite } from "./pglite-driver.ts";
import { openPostgres } from "./postgres-driver.ts";
import { sql } from "./sql.ts";

/** DATABASE_URL → a real server; none → embedded PGlite in the data directory. */
export async function openDb(
  config: Pick<Config, "databaseUrl" | "dataDir" | "workerConcurrency" | "leaderTtlMs">,
  appName = "scheduler",
  onSeedFailed?: (err: unknown) => void,
  onWarn: (message: string) => void = (m) => process.stderr.write(`${m}\n`),
): Promise<Db> {
  if (config.databaseUrl) {
    const open = (idleInTransactionTimeoutMs: number | undefined) =>
      openPostgres({
        url: config.databaseUrl!,
        applicationName: appName,
        maxConnections: Math.min(20, 4 + Math.ceil(config.workerConcurrency / 50)),
        idleInTransactionTimeoutMs,
      });
    // No transaction of ours waits on anything but the database between its statements (the
    // index relay's Redis write aside: a pass ended here is applied again by the next). One
    // idle for a lease TTL is a paused or cut-off process: its locks (a shard's lease row held
    // FOR SHARE by a claim or a generation pass) would hold off the takeover of its lapsed
    // leases until the server noticed the client gone, hours later on a silent network. Ended
    // at the TTL, the takeover still comes within the TTL and the skew margin.
    const idleTimeout = async (db: Db) => Number((await db.query<{ ms: string | number }>(sql("SessionIdleTimeout")))[0]?.ms ?? 0);
    let db = open(config.leaderTtlMs);
    let refused = false;
    let ms: number;
    try {
      ms = await idleTimeout(db);
    } catch (err) {
      // A pooler (PgBouncer) refuses startup parameters it does not know, every connection.
      // Anything else (the server not up yet) is the caller's to wait out.
      if (!/unsupported startup parameter/i.test(String((err as Error)?.message))) return db;
      await db.close();
      refused = true;
      db = open(undefined);
      try {
        ms = await idleTimeout(db);
      } catch {
        return db;
      }
    }
    // Refused, or ignored (a pooler's ignore_startup_parameters): fine if the server sets it.
    if (ms === 0 || ms > config.leaderTtlMs) {
      onWarn(
        (refused
          ? "the database connection refused idle_in_transaction_session_timeout as a startup parameter (a pooler such as PgBouncer?): running without it"
          : `the database sessions run with idle_in_transaction_session_timeout = ${ms}ms, not the lease TTL (${config.leaderTtlMs}ms), as asked at start-up (a pooler that ignores it?)`) +
          ", so a process paused inside a transaction can hold off a takeover until its connection ends; " +
          `set it on the server (ALTER ROLE … SET idle_in_transaction_session_timeout = '${config.leaderTtlMs}ms'), or connect directly`,
      );
    }
    return db;
  }
  return openPglite({ dataDir: config.dataDir, onSeedFailed });
}
