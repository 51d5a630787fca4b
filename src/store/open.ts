import type { Config } from "../config.ts";
import type { Db } from "./db.ts";
import { openPglite } from "./pglite-driver.ts";
import { openPostgres } from "./postgres-driver.ts";

/** DATABASE_URL → a real server; none → embedded PGlite in the data directory. */
export async function openDb(
  config: Pick<Config, "databaseUrl" | "dataDir" | "workerConcurrency" | "leaderTtlMs">,
  appName = "scheduler",
  onSeedFailed?: (err: unknown) => void,
): Promise<Db> {
  if (config.databaseUrl) {
    return openPostgres({
      url: config.databaseUrl,
      applicationName: appName,
      maxConnections: Math.min(20, 4 + Math.ceil(config.workerConcurrency / 50)),
      // No transaction of ours waits on anything but the database between its statements (the
      // index relay's Redis write aside: a pass ended here is applied again by the next). One
      // idle for a lease TTL is a paused or cut-off process: its locks (a shard's lease row held
      // FOR SHARE by a claim or a generation pass) would hold off the takeover of its lapsed
      // leases until the server noticed the client gone, hours later on a silent network. Ended
      // at the TTL, the takeover still comes within the TTL and the skew margin.
      idleInTransactionTimeoutMs: config.leaderTtlMs,
    });
  }
  return openPglite({ dataDir: config.dataDir, onSeedFailed });
}
