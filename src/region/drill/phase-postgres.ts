import { rmSync } from "node:fs";
import { findPgBin } from "./pg-bin.ts";
import { PgUser } from "./pg-user.ts";
import { startReplicatedPostgres } from "./replicated-pg.ts";
import type { DrillState } from "./drill-state.ts";

/** 1–2. The PostgreSQL primary and its streaming standby, with the drill's temp and logs dirs. */
export async function startPostgres(s: DrillState): Promise<void> {
  s.bin = findPgBin(s.o.pgBin, s.env);
  s.user = await PgUser.detect();
  // Logs in a dir of their own, so the paths named in messages stay valid when it is kept.
  s.logs = await s.user.makeTempDir("scheduler-drill-logs-");
  s.cleanup.add(
    "logs dir",
    () => s.removeLogs(),
    () => rmSync(s.logs, { recursive: true, force: true }),
  );
  s.work = await s.user.makeTempDir("scheduler-drill-");
  s.cleanup.add(
    "temp dir",
    () => rmSync(s.work, { recursive: true, force: true }),
    () => rmSync(s.work, { recursive: true, force: true }),
  );
  ({
    primary: s.primary,
    standby: s.standby,
    version: s.pgVersion,
  } = await startReplicatedPostgres({
    bin: s.bin,
    user: s.user,
    work: s.work,
    logs: s.logs,
    sync: s.o.sync,
    cleanup: s.cleanup,
  }));
  s.phase("postgres");
  s.progress(
    `PostgreSQL ${s.pgVersion} (${s.bin}${s.user.asRoot ? ", as user postgres" : ""}): primary 127.0.0.1:${s.primary.port}, ` +
      `standby 127.0.0.1:${s.standby.port} streaming ${s.o.sync ? "synchronously (synchronous_standby_names='standby')" : "asynchronously"}`,
  );
}
