import { PGlite, types } from "@electric-sql/pglite";
import { parseInt8 } from "./int8.ts";
import { mkdirSync } from "node:fs";
import type { Db, Queryable, Tx } from "./db.ts";
import { acquireDirLock } from "./dir-lock.ts";
import { loadPgliteAssets } from "./pglite-assets.ts";
import { needsInit, seedDataDir, unseed } from "./pglite-seed.ts";

export interface PgliteDriverOptions {
  /** Directory of the data files; omitted → in memory (tests only). */
  dataDir?: string;
  /** Told when the bundled seed could not be resumed and initdb runs instead (slower, ~1 GB peak). */
  onSeedFailed?: (err: unknown) => void;
  /** In memory only: start from this dump (dumpDataDir) instead of running initdb. Tests copy a migrated template so. */
  loadDataDir?: Blob;
}

export interface PgliteDb extends Db {
  /** The data directory as one uncompressed tarball, for another instance's loadDataDir. */
  dumpDataDir(): Promise<Blob>;
}

/**
 * The embedded default: one PGlite in this process. It has one backend, so a transaction
 * blocks every other statement; keep transactions short (they are, by design).
 * PGlite does not lock its directory and two processes on one directory lose data, so the
 * directory is locked first (flock, released by the kernel even on SIGKILL).
 */
export async function openPglite(opts: PgliteDriverOptions): Promise<PgliteDb> {
  let unlock: (() => void) | undefined;
  if (opts.dataDir) {
    mkdirSync(opts.dataDir, { recursive: true });
    unlock = acquireDirLock(opts.dataDir);
  }
  const assets = await loadPgliteAssets();
  const create = () =>
    PGlite.create({
      dataDir: opts.dataDir,
      loadDataDir: opts.loadDataDir,
      ...assets,
      // int8 as a number on both drivers (int8.ts): rows reach the code typed once.
      parsers: { [types.INT8]: parseInt8 },
    });
  let pg: PGlite;
  try {
    // A fresh directory is unpacked from the seed rather than made by initdb (pglite-seed.ts).
    const seeded = opts.dataDir !== undefined && needsInit(opts.dataDir);
    if (seeded) await seedDataDir(opts.dataDir!);
    try {
      pg = await create();
    } catch (err) {
      if (!seeded) throw err;
      // A seed this PGlite cannot resume (made by another version): its own initdb instead.
      opts.onSeedFailed?.(err);
      unseed(opts.dataDir!, ["scheduler.lock"]);
      pg = await create();
    }
  } catch (err) {
    unlock?.();
    throw err;
  }
  const run = (q: { query: PGlite["query"]; exec: PGlite["exec"] }): Queryable => ({
    query: async <T>(text: string, params: unknown[] = []) => (await q.query<T>(text, params)).rows,
    exec: async (text: string) => {
      await q.exec(text);
    },
  });
  const runTx = (t: Parameters<Parameters<PGlite["transaction"]>[0]>[0]): Tx => ({
    ...run(t),
    async savepoint<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
      await t.query("SAVEPOINT sp");
      let out: T;
      try {
        out = await fn(run(t));
      } catch (err) {
        await t.query("ROLLBACK TO SAVEPOINT sp");
        throw err;
      }
      await t.query("RELEASE SAVEPOINT sp");
      return out;
    },
  });
  const base = run(pg);
  return {
    kind: "pglite",
    query: base.query,
    exec: base.exec,
    tx: <T>(fn: (q: Tx) => Promise<T>) => pg.transaction((t) => fn(runTx(t))),
    async listen(channel, onNotify, onListen) {
      const off = await pg.listen(channel, onNotify);
      onListen?.();
      return () => off();
    },
    dumpDataDir: () => pg.dumpDataDir("none"),
    async close() {
      await pg.close();
      unlock?.();
    },
  };
}
