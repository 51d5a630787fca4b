#!/usr/bin/env bun
// Regenerates src/store/pglite-seed/: the data directory PGlite's initdb makes, as a tarball,
// and the PGlite version that made it. A fresh embedded data directory is unpacked from it
// (src/store/pglite-seed.ts) instead of running initdb, which peaks at about 1 GB of memory.
//
// Run after upgrading @electric-sql/pglite (test/store/pglite-seed.test.ts fails until then):
//   bun scripts/pglite-seed.ts
import { PGlite } from "@electric-sql/pglite";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadPgliteAssets } from "../src/store/pglite-assets.ts";

const root = resolve(import.meta.dir, "..");
const dir = join(root, "src/store/pglite-seed");
const version = (JSON.parse(readFileSync(join(root, "node_modules/@electric-sql/pglite/package.json"), "utf8")) as { version: string }).version;

const pg = await PGlite.create({ ...(await loadPgliteAssets()) });
const tarball = await pg.dumpDataDir("gzip");
await pg.close();
await Bun.write(join(dir, "datadir.tar.gz"), tarball);
await Bun.write(join(dir, "seed.json"), `${JSON.stringify({ pglite: version }, null, 2)}\n`);
console.log(`pglite-seed: ${(tarball.size / 2 ** 20).toFixed(1)} MiB from PGlite ${version} → ${dir}`);
