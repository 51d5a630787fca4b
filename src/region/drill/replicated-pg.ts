import { join } from "node:path";
import type { Cleanup } from "./cleanup.ts";
import { PgCluster, waitForStandby } from "./pg-cluster.ts";
import type { PgUser } from "./pg-user.ts";

/**
 * The drill's two regions' databases: a primary and a streaming standby (synchronous with
 * `sync`), in `work`, logging to `logs`, each stopped by the cleanup.
 */
export async function startReplicatedPostgres(o: {
  bin: string;
  user: PgUser;
  work: string;
  logs: string;
  sync: boolean;
  cleanup: Cleanup;
}): Promise<{ primary: PgCluster; standby: PgCluster; version: string }> {
  const mk = (name: string) =>
    new PgCluster({ name, bin: o.bin, user: o.user, dataDir: join(o.work, name), socketDir: o.work, logFile: join(o.logs, `postgres-${name}.log`) });
  const primary = mk("primary");
  const standby = mk("standby");
  for (const pg of [primary, standby])
    o.cleanup.add(
      `postgres ${pg.name}`,
      () => pg.stopImmediate(),
      () => pg.stopSync(),
    );

  const version = await primary.version();
  await primary.initdb();
  primary.appendConf({
    listen_addresses: "127.0.0.1",
    unix_socket_directories: o.work,
    wal_level: "replica",
    max_wal_senders: 10,
    max_replication_slots: 10,
    wal_keep_size: "256MB",
    hot_standby: "on",
    fsync: "off",
    synchronous_commit: "on",
    max_connections: 300,
  });
  await primary.start();
  await primary.sql("create database scheduler");
  await standby.basebackupFrom(primary, "standby");
  await standby.start();
  if (o.sync) {
    // Set on the primary only, after the base backup: a promoted standby that inherited
    // it would wait forever for a standby of its own.
    await primary.sql("alter system set synchronous_standby_names = 'standby'");
    await primary.sql("select pg_reload_conf()");
  }
  await waitForStandby(primary, "standby", o.sync);
  return { primary, standby, version };
}
