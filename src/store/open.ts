import type { Config } from "../config.ts";
import type { Db } from "./db.ts";
import { openPglite } from "./pglite-driver.ts";
import { openPostgres } from "./postgres-driver.ts";

/** DATABASE_URL → a real server; none → embedded PGlite in the data directory. */
export async function openDb(
  config: Pick<Config, "databaseUrl" | "dataDir" | "workerConcurrency">,
  appName = "scheduler",
  onSeedFailed?: (err: unknown) => void,
): Promise<Db> {
  if (config.databaseUrl) {
    return openPostgres({ url: config.databaseUrl, applicationName: appName, maxConnections: Math.min(20, 4 + Math.ceil(config.workerConcurrency / 50)) });
  }
  return openPglite({ dataDir: config.dataDir, onSeedFailed });
}
