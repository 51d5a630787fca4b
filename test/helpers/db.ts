import { afterAll, beforeAll } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { seedAuthority } from "../../src/store/authority.ts";
import type { Db } from "../../src/store/db.ts";
import { migrate } from "../../src/store/migrate.ts";
import { MIGRATIONS } from "../../src/store/migrations.ts";
import { openPglite } from "../../src/store/pglite-driver.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";

export type DriverName = "postgres" | "pglite";
/** Suites that run on both drivers iterate over this. */
export const DRIVERS: DriverName[] = ["postgres", "pglite"];

/** The admin URL of the test server. npm test starts one; running bun test alone needs it set. */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url)
    throw new Error(
      "TEST_DATABASE_URL is not set: run the suite with `npm test`, which starts PostgreSQL, or set it to a server where tests may create databases",
    );
  return url;
}

export interface TestDb {
  db: Db;
  /** postgres: the database URL (for processes started by the test); pglite: undefined. */
  url?: string;
  close(): Promise<void>;
}

/**
 * A fresh, migrated database: a new database on the test server, or a new in-memory PGlite.
 * Both are copies of a template migrated once per test process, not a run of every migration:
 * that was ~0.3 s per PostgreSQL database and ~1.5 s per PGlite (initdb, then the migrations);
 * a PGlite copy starts in ~0.2 s.
 */
export async function freshDb(driver: DriverName): Promise<TestDb> {
  if (driver === "pglite") {
    const db = await openPglite({ loadDataDir: await pgliteTemplate() });
    return { db, close: () => db.close() };
  }
  const url = await createDatabase({ migrated: true });
  const db = openPostgres({ url, maxConnections: 10 });
  return {
    db,
    url,
    close: async () => {
      await db.close();
      await dropDatabase(url);
    },
  };
}

/**
 * A fresh database whose region authority is seeded (home region `region`), for the describe
 * block that calls this: made before its tests, closed after them. The setup most race tests
 * wrote out by hand (freshDb, seedAuthority, a close in afterAll).
 */
export function describeDb(driver: DriverName, region = "local"): { readonly db: Db; readonly url: string | undefined } {
  let t: TestDb | undefined;
  beforeAll(async () => {
    t = await freshDb(driver);
    await seedAuthority(t.db, region);
  });
  afterAll(async () => {
    await t?.close();
  });
  const made = () => {
    if (!t) throw new Error("describeDb: its database exists only inside the describe block's tests");
    return t;
  };
  return {
    get db(): Db {
      return made().db;
    },
    get url(): string | undefined {
      return made().url;
    },
  };
}

/**
 * Applies every migration before `version`, as an older release left the database: a
 * migration's test then puts rows in and runs `migrate` to apply the rest.
 */
export async function migrateBefore(db: Db, version: number): Promise<void> {
  await db.exec("CREATE TABLE scheduler_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  for (const m of MIGRATIONS.filter((m) => m.version < version)) {
    await db.exec(m.sql);
    await db.query("INSERT INTO scheduler_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
  }
}

/** A new database on the test server: empty (processes started on it migrate it themselves), or migrated. */
export async function createDatabase(opts: { migrated?: boolean } = {}): Promise<string> {
  const template = opts.migrated ? ` TEMPLATE ${await postgresTemplate()}` : "";
  const name = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const sql = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`CREATE DATABASE ${name}${template}`);
  } finally {
    await sql.end();
  }
  return databaseUrl(name);
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

function databaseUrl(name: string): string {
  const u = new URL(testDatabaseUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

// Named by the migrations' text, so a changed migration gets a new template even on a
// server that outlives the run (DATABASE_URL), and the old one is never used again.
const templateName = `tmpl_${createHash("sha256")
  .update(MIGRATIONS.map((m) => `${m.version}\n${m.sql}`).join("\n"))
  .digest("hex")
  .slice(0, 16)}`;
// Test processes that share a server (files run in parallel) build the template one at a time.
const TEMPLATE_LOCK = 727_115_002;

let pgTemplate: Promise<string> | undefined;
function postgresTemplate(): Promise<string> {
  pgTemplate ??= buildPostgresTemplate().catch((err) => {
    pgTemplate = undefined;
    throw err;
  });
  return pgTemplate;
}

/**
 * Migrated under another name and renamed when done, so a process that died half-way leaves
 * no template that looks finished. The session lock goes with the admin connection.
 */
async function buildPostgresTemplate(): Promise<string> {
  const admin = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
  try {
    await admin`SELECT pg_advisory_lock(${TEMPLATE_LOCK})`;
    const [found] = await admin`SELECT 1 FROM pg_database WHERE datname = ${templateName}`;
    if (found) return templateName;
    const building = `${templateName}_building`;
    await admin.unsafe(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
    await admin.unsafe(`CREATE DATABASE ${building}`);
    // CREATE DATABASE … TEMPLATE refuses a template anyone is connected to: closed before use.
    const db = openPostgres({ url: databaseUrl(building), maxConnections: 1 });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    await admin.unsafe(`ALTER DATABASE ${building} RENAME TO ${templateName}`);
    return templateName;
  } finally {
    await admin.end();
  }
}

let pgliteDump: Promise<Blob> | undefined;
function pgliteTemplate(): Promise<Blob> {
  pgliteDump ??= loadOrBuildPgliteTemplate().catch((err) => {
    pgliteDump = undefined;
    throw err;
  });
  return pgliteDump;
}

/**
 * Kept on disk as well: bun runs each test file in a fresh module registry (--parallel implies
 * --isolate), so an in-memory copy alone would be rebuilt by every file. Written to a temporary
 * name and renamed, so a reader never sees half a file.
 */
async function loadOrBuildPgliteTemplate(): Promise<Blob> {
  const dir = join(tmpdir(), "scheduler-test-templates");
  const file = join(dir, `pglite-${templateName}.tar`);
  if (existsSync(file)) return new Blob([await Bun.file(file).arrayBuffer()]);
  const db = await openPglite({});
  let dump: Blob;
  try {
    await migrate(db);
    dump = await db.dumpDataDir();
  } finally {
    await db.close();
  }
  mkdirSync(dir, { recursive: true });
  const part = `${file}.${process.pid}.part`;
  await Bun.write(part, dump);
  renameSync(part, file);
  return dump;
}
