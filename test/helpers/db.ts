import postgres from "postgres";
import type { Db } from "../../src/store/db.ts";
import { migrate } from "../../src/store/migrate.ts";
import { openPglite } from "../../src/store/pglite-driver.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";

export type DriverName = "postgres" | "pglite";
/** Suites that run on both drivers iterate over this. */
export const DRIVERS: DriverName[] = ["postgres", "pglite"];

/** The admin URL of the test server. npm test starts one; running bun test alone needs it set. */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error("TEST_DATABASE_URL is not set: run the suite with `npm test`, which starts PostgreSQL, or set it to a server where tests may create databases");
  return url;
}

export interface TestDb {
  db: Db;
  /** postgres: the database URL (for processes started by the test); pglite: undefined. */
  url?: string;
  close(): Promise<void>;
}

/** A fresh, migrated database: a new database on the test server, or a new in-memory PGlite. */
export async function freshDb(driver: DriverName): Promise<TestDb> {
  if (driver === "pglite") {
    const db = await openPglite({});
    await migrate(db);
    return { db, close: () => db.close() };
  }
  const url = await createDatabase();
  const db = openPostgres({ url, maxConnections: 10 });
  await migrate(db);
  return {
    db,
    url,
    close: async () => {
      await db.close();
      await dropDatabase(url);
    },
  };
}

export async function createDatabase(): Promise<string> {
  const admin = testDatabaseUrl();
  const name = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await sql.end();
  }
  const u = new URL(admin);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function dropDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const sql = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await sql.end();
  }
}
