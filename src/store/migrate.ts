import type { Db } from "./db.ts";
import { MIGRATIONS } from "./migrations.ts";

// A fixed advisory-lock key so that several processes starting at once migrate one at a time.
const MIGRATION_LOCK = 727_115_001;

/** Applies every migration not yet recorded, all in one transaction (all or nothing). Idempotent. */
export async function migrate(db: Db): Promise<{ applied: string[] }> {
  const applied: string[] = [];
  await db.tx(async (q) => {
    await q.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await q.query(`CREATE TABLE IF NOT EXISTS scheduler_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await q.query<{ version: number }>("SELECT version FROM scheduler_migrations")).map((r) => r.version));
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue;
      await q.exec(m.sql);
      await q.query("INSERT INTO scheduler_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
      applied.push(m.name);
    }
  });
  return { applied };
}

/** True when every known migration is applied: what /readyz reports. */
export async function isMigrated(db: Db): Promise<boolean> {
  try {
    const rows = await db.query<{ n: string }>("SELECT count(*) AS n FROM scheduler_migrations");
    return Number(rows[0]?.n ?? 0) >= MIGRATIONS.length;
  } catch {
    return false;
  }
}
