import { PGlite, types } from "@electric-sql/pglite";
import { mkdirSync } from "node:fs";
import type { Db, Queryable, Tx } from "./db.ts";
import { acquireDirLock } from "./dir-lock.ts";
import { loadPgliteAssets } from "./pglite-assets.ts";

export interface PgliteDriverOptions {
  /** Directory of the data files; omitted → in memory (tests only). */
  dataDir?: string;
}

/**
 * The embedded default: one PGlite in this process. It has one backend, so a transaction
 * blocks every other statement; keep transactions short (they are, by design).
 * PGlite does not lock its directory and two processes on one directory lose data, so the
 * directory is locked first (flock, released by the kernel even on SIGKILL).
 */
export async function openPglite(opts: PgliteDriverOptions): Promise<Db> {
  let unlock: (() => void) | undefined;
  if (opts.dataDir) {
    mkdirSync(opts.dataDir, { recursive: true });
    unlock = acquireDirLock(opts.dataDir);
  }
  const assets = await loadPgliteAssets();
  let pg: PGlite;
  try {
    pg = await PGlite.create({
      dataDir: opts.dataDir,
      ...assets,
      // int8 as string, like postgres.js, so row mappers behave the same on both drivers.
      parsers: { [types.INT8]: (v: string) => v },
    });
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
    async close() {
      await pg.close();
      unlock?.();
    },
  };
}
