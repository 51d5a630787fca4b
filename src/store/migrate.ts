import type { Db, Queryable } from "./db.ts";
import { sqlState } from "./db-errors.ts";
import { MIGRATIONS, type Migration } from "./migrations.ts";

// A fixed advisory-lock key so that several processes starting at once migrate one at a time.
const MIGRATION_LOCK = 727_115_001;

/** SQLSTATE lock_not_available: a lock wait ran past lock_timeout. */
const LOCK_NOT_AVAILABLE = "55P03";

export interface MigrateOptions {
  /**
   * How long each lock a migration waits for (on a table it changes) may take before the try
   * gives up: its work is undone (a savepoint), and it is tried again after `pauseMs`. A waiting
   * ALTER or CREATE TRIGGER queues every later statement on that table behind it, the delivery
   * path's too: without a bound, one long transaction of another client (a report, a forgotten
   * psql session) stalled delivery for as long as it stayed open. The pause lets that queue
   * drain, with the advisory lock still held so that no other migrator starts a wait of its
   * own in it.
   */
  lockTimeoutMs?: number;
  /** Tries before migrate fails with MigrationLockError. */
  tries?: number;
  pauseMs?: number;
  /** Told before each pause: which migration waited, and which try comes next. */
  onRetry?: (info: { migration: string; nextTry: number; tries: number }) => void;
  /** Test seam: the migrations to apply (default: the shipped ones). */
  migrations?: readonly Migration[];
}

export const MIGRATE_DEFAULTS = { lockTimeoutMs: 2000, tries: 10, pauseMs: 1000 } as const;

/** Migrations that could not lock what they change within their tries; nothing was applied. */
export class MigrationLockError extends Error {
  override readonly name = "MigrationLockError";
}

/**
 * Applies every migration not yet recorded, all in one transaction (all or nothing). Idempotent.
 * A lock it waits for too long undoes its work; it is tried again (MigrateOptions).
 */
export async function migrate(db: Db, o: MigrateOptions = {}): Promise<{ applied: string[] }> {
  const lockTimeoutMs = o.lockTimeoutMs ?? MIGRATE_DEFAULTS.lockTimeoutMs;
  const tries = o.tries ?? MIGRATE_DEFAULTS.tries;
  const pauseMs = o.pauseMs ?? MIGRATE_DEFAULTS.pauseMs;
  return db.tx(async (q) => {
    // Another process migrating is not a lock to give up on: no bound on this wait, even where
    // the server, the database or the role sets a lock_timeout or a statement_timeout. Nor on a
    // migration's own statements (an index built on a large table) or the pause between tries:
    // cancelled, they would undo the whole migration and leave the scheduler unable to start.
    // The waits that hold up other clients are bounded by lock_timeout below. One round trip:
    // since PostgreSQL 13 each statement of a simple query arms its own statement_timeout, so the
    // lock's wait runs under the settings made before it.
    await q.exec(`SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0; SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await q.query(`CREATE TABLE IF NOT EXISTS scheduler_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await q.query<{ version: number }>("SELECT version FROM scheduler_migrations")).map((r) => r.version));
    const pending = (o.migrations ?? MIGRATIONS).filter((m) => !done.has(m.version));
    if (pending.length === 0) return { applied: [] };
    await q.query("SELECT set_config('lock_timeout', $1, true)", [`${lockTimeoutMs}ms`]);
    for (let attempt = 1; ; attempt++) {
      const at = { migration: pending[0]!.name };
      try {
        await q.savepoint((s) => applyAll(s, pending, at));
        return { applied: pending.map((m) => m.name) };
      } catch (err) {
        if (sqlState(err) !== LOCK_NOT_AVAILABLE) throw err;
        if (attempt >= tries) {
          throw new MigrationLockError(
            `migration ${at.migration} could not lock a table it changes within ${lockTimeoutMs / 1000} s, ${tries} times: ` +
              "another transaction holds it (find it in pg_stat_activity, e.g. a long 'idle in transaction' session). " +
              "Nothing was changed; run the migration again once that transaction has ended.",
            { cause: err },
          );
        }
        o.onRetry?.({ migration: at.migration, nextTry: attempt + 1, tries });
        // In the server, not a timer here: an idle transaction outlives no
        // idle_in_transaction_session_timeout (SCHEDULER_LEADER_TTL, 1 s at least), a sleeping
        // statement does; and a process frozen meanwhile still lets its lock go after it.
        await q.query("SELECT pg_sleep($1)", [pauseMs / 1000]);
      }
    }
  });
}

async function applyAll(q: Queryable, pending: readonly Migration[], at: { migration: string }): Promise<void> {
  for (const m of pending) {
    at.migration = m.name;
    await q.exec(m.sql);
    await q.query("INSERT INTO scheduler_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
  }
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
