/**
 * What every end-to-end bench sets up the same way: its own database (a fresh one on the
 * server in DATABASE_URL / TEST_DATABASE_URL, else an embedded PGlite in a temp dir, said
 * plainly), and a cleanup that runs once, also on SIGINT/SIGTERM (exit 130).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase, dropDatabase } from "../../test/helpers/db.ts";

export interface BenchDatabase {
  /** A PostgreSQL database made for this run (dropped by the cleanup), or undefined. */
  dbUrl?: string;
  /** Without a server: the PGlite data dir (removed by the cleanup). */
  dataDir?: string;
  label: string;
}

export interface BenchHarness {
  /** Set when a signal stopped the run: the caller returns 130. */
  readonly interrupted: boolean;
  /** Runs at cleanup, before the database is removed (latest first). */
  onCleanup(fn: () => Promise<void> | void): void;
  /** Makes the run's database; the cleanup removes it. */
  database(tag: string): Promise<BenchDatabase>;
  /** Once, whoever calls first. */
  cleanup(): Promise<void>;
}

export function benchHarness(say: (s: string) => void): BenchHarness {
  const fns: (() => Promise<void> | void)[] = [];
  let db: BenchDatabase | undefined;
  let cleaning: Promise<void> | undefined;
  let interrupted = false;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const fn of fns.reverse()) await fn();
      if (db?.dbUrl) await dropDatabase(db.dbUrl).catch((err) => say(`bench: could not drop ${db!.dbUrl}: ${(err as Error).message}`));
      if (db?.dataDir) rmSync(db.dataDir, { recursive: true, force: true });
    })());
  const onSignal = (sig: NodeJS.Signals) => {
    interrupted = true;
    say(`bench: ${sig}: stopping the scheduler and removing the database`);
    cleanup().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  return {
    get interrupted() {
      return interrupted;
    },
    onCleanup: (fn) => void fns.push(fn),
    cleanup,
    async database(tag) {
      const adminUrl = process.env.DATABASE_URL || process.env.TEST_DATABASE_URL;
      if (adminUrl) {
        process.env.TEST_DATABASE_URL = adminUrl; // createDatabase/dropDatabase read it
        const dbUrl = await createDatabase();
        db = { dbUrl, label: `PostgreSQL, fresh database ${new URL(dbUrl).pathname.slice(1)} (dropped at the end)` };
      } else {
        const dataDir = mkdtempSync(join(tmpdir(), `scheduler-${tag}-pglite-`));
        db = { dataDir, label: `embedded PGlite in ${dataDir}: neither DATABASE_URL nor TEST_DATABASE_URL is set, so this is NOT a PostgreSQL server figure` };
      }
      return db;
    },
  };
}
