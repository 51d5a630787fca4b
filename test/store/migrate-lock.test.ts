/**
 * A migration that changes a table waits for every lock other clients hold on it, and while it
 * waits, every later statement on that table queues behind it: the delivery path's claims and
 * completions too. migrate() used to wait without a bound, so one long transaction of another
 * client (a report, a psql session left open) stalled delivery for as long as it stayed open,
 * through a deploy's release command. Now each migration transaction waits at most its lock
 * timeout, is undone, and tried again after a pause in which the queue drains.
 *
 * PostgreSQL only: PGlite has one connection, so no other client can hold a lock.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { MIGRATE_DEFAULTS, migrate, MigrationLockError } from "../../src/store/migrate.ts";
import { MIGRATIONS } from "../../src/store/migrations.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { holdRowLock } from "../helpers/row-lock.ts";
import { eventually } from "../helpers/target.ts";

const EXTRA = { version: 900_001, name: "900001_test_column", sql: "ALTER TABLE jobs ADD COLUMN test_column int" };
const WITH_EXTRA = [...MIGRATIONS, EXTRA];

async function hasColumn(t: TestDb): Promise<boolean> {
  const rows = await t.db.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'jobs' AND column_name = 'test_column'");
  return rows.length === 1;
}

/** Until a lock on jobs is waited for (the migration's ALTER, queued behind the holder). */
async function lockWaited(t: TestDb): Promise<void> {
  await eventually(
    async () => (await t.db.query("SELECT 1 FROM pg_locks WHERE relation = 'jobs'::regclass AND NOT granted")).length > 0,
    5000,
    "the migration waiting for its lock on jobs",
  );
}

async function recorded(t: TestDb): Promise<boolean> {
  return (await t.db.query("SELECT 1 FROM scheduler_migrations WHERE version = $1", [EXTRA.version])).length === 1;
}

describe("migrations behind another client's lock (postgres)", () => {
  let t: TestDb;
  beforeEach(async () => {
    t = await freshDb("postgres");
  });
  afterEach(async () => {
    await t.close();
  });

  test("the defaults bound a stall: 2 s a try, 10 tries, 1 s between", () => {
    expect(MIGRATE_DEFAULTS).toEqual({ lockTimeoutMs: 2000, tries: 10, pauseMs: 1000 });
  });

  test("a lock held throughout: each try gives up at its timeout, other clients' statements on the table wait no longer than that, and it fails saying what to do; nothing is applied", async () => {
    // An open transaction that read jobs: its ACCESS SHARE lock conflicts with ALTER TABLE's.
    const holder = await holdRowLock(t.url!, "SELECT 1 FROM jobs LIMIT 1", []);
    try {
      const retries: { migration: string; nextTry: number; tries: number }[] = [];
      const started = performance.now();
      const migrating = migrate(t.db, { migrations: WITH_EXTRA, lockTimeoutMs: 400, tries: 3, pauseMs: 100, onRetry: (r) => retries.push(r) }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // A statement of another client, sent while the migration waits for its lock: it queues
      // behind the waiting ALTER and goes once that try gives up (it waited forever before).
      await lockWaited(t);
      const sent = performance.now();
      await t.db.query("SELECT count(*) FROM jobs");
      const queuedMs = performance.now() - sent;
      expect(queuedMs).toBeLessThan(400 + 1000);

      const err = await migrating;
      const tookMs = performance.now() - started;
      expect(err).toBeInstanceOf(MigrationLockError);
      const message = (err as Error).message;
      expect(message).toContain("migration 900001_test_column could not lock a table it changes within 0.4 s, 3 times");
      expect(message).toContain("pg_stat_activity");
      expect(message).toContain("Nothing was changed; run the migration again once that transaction has ended.");
      expect(retries).toEqual([
        { migration: EXTRA.name, nextTry: 2, tries: 3 },
        { migration: EXTRA.name, nextTry: 3, tries: 3 },
      ]);
      // Three tries of 400 ms and two pauses of 100, not a wait for the holder.
      expect(tookMs).toBeGreaterThanOrEqual(3 * 400 + 2 * 100 - 50);
      expect(tookMs).toBeLessThan(10_000);
      expect(await hasColumn(t)).toBe(false);
      expect(await recorded(t)).toBe(false);
    } finally {
      await holder.release();
    }
  }, 30_000);

  test("a lock held for a while: it is tried again until the lock goes, then applied once", async () => {
    const holder = await holdRowLock(t.url!, "SELECT 1 FROM jobs LIMIT 1", []);
    const retries: number[] = [];
    let migrating: Promise<unknown> | undefined;
    try {
      migrating = migrate(t.db, { migrations: WITH_EXTRA, lockTimeoutMs: 200, tries: 50, pauseMs: 100, onRetry: (r) => retries.push(r.nextTry) });
      await eventually(() => retries.length >= 2, 10_000, "two tries given up");
    } finally {
      await holder.release();
    }
    expect(await migrating).toEqual({ applied: [EXTRA.name] });
    expect(await hasColumn(t)).toBe(true);
    expect(await recorded(t)).toBe(true);
    // Up to date, it touches no table of the scheduler's: even jobs locked against every reader
    // is no wait.
    const again = await holdRowLock(t.url!, "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE", []);
    try {
      expect(await migrate(t.db, { migrations: WITH_EXTRA, lockTimeoutMs: 200, tries: 1 })).toEqual({ applied: [] });
    } finally {
      await again.release();
    }
  }, 30_000);

  test("two migrators behind one lock, with the database's own lock_timeout and statement_timeout: the pauses are free for other clients, the second waits for the first without giving up", async () => {
    // Timeouts of the database's own, shorter than every wait here: they must not end the wait
    // for the other migrator, a try's wait for its lock (its own bound is lockTimeoutMs) or a
    // pause. Only sessions opened after this get them: the second migrator's.
    const name = new URL(t.url!).pathname.slice(1);
    await t.db.query(`ALTER DATABASE "${name}" SET lock_timeout = '100ms'`);
    await t.db.query(`ALTER DATABASE "${name}" SET statement_timeout = '100ms'`);
    const other = openPostgres({ url: t.url!, maxConnections: 1 });
    const probe = openPostgres({ url: t.url!, maxConnections: 1 });
    await probe.query("SET lock_timeout = 0");
    await probe.query("SET statement_timeout = 0");
    const holder = await holdRowLock(t.url!, "SELECT 1 FROM jobs LIMIT 1", []);
    try {
      // Two tries' waits are longer than a pause: had each migrator let the advisory lock go
      // between its tries, the other's try would fill the pause.
      const opts = { migrations: WITH_EXTRA, lockTimeoutMs: 300, tries: 3, pauseMs: 200 };
      const outcome = (p: Promise<unknown>) =>
        p.then(
          () => undefined,
          (err: unknown) => err as Error,
        );
      const first = outcome(migrate(t.db, opts));
      await lockWaited(t);
      const second = outcome(migrate(other, opts));
      // Plain reads of jobs for 1.5 s, one after the other: the pauses (400 ms of it) are free.
      let reads = 0;
      const until = performance.now() + 1500;
      while (performance.now() < until) {
        await probe.query("SELECT 1 FROM jobs LIMIT 1");
        reads++;
      }
      expect(reads).toBeGreaterThan(50);
      const [e1, e2] = await Promise.all([first, second]);
      for (const e of [e1, e2]) {
        expect(e).toBeInstanceOf(MigrationLockError);
        expect(e!.message).toContain("migration 900001_test_column could not lock a table it changes within 0.3 s, 3 times");
      }
      expect(await hasColumn(t)).toBe(false);
    } finally {
      await holder.release();
      await other.close();
      await probe.close();
    }
  }, 30_000);

  test("a pause longer than the session's idle-in-transaction timeout (SCHEDULER_LEADER_TTL's): the migration lives through it", async () => {
    const short = openPostgres({ url: t.url!, maxConnections: 1, idleInTransactionTimeoutMs: 300 });
    const holder = await holdRowLock(t.url!, "SELECT 1 FROM jobs LIMIT 1", []);
    let migrating: Promise<unknown> | undefined;
    try {
      let retried = 0;
      migrating = migrate(short, { migrations: WITH_EXTRA, lockTimeoutMs: 200, tries: 20, pauseMs: 800, onRetry: () => retried++ });
      await eventually(() => retried >= 2, 10_000, "two pauses begun");
    } finally {
      await holder.release();
    }
    try {
      // A timer's pause left the transaction idle for 800 ms: the server ended the session.
      expect(await migrating).toEqual({ applied: [EXTRA.name] });
      expect(await hasColumn(t)).toBe(true);
    } finally {
      await short.close();
    }
  }, 30_000);

  test("errors other than a lock timeout are not tried again", async () => {
    let retried = 0;
    const broken = { version: 900_002, name: "900002_broken", sql: "ALTER TABLE no_such_table ADD COLUMN x int" };
    await expect(migrate(t.db, { migrations: [...MIGRATIONS, broken], tries: 5, onRetry: () => retried++ })).rejects.toThrow(/no_such_table/);
    expect(retried).toBe(0);
  });
});
