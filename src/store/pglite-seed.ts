// PGlite's own first start runs initdb in a second PGlite instance and copies its whole heap
// around: about 1 GB resident for a few seconds, where a resumed start needs under 300 MB.
// So a fresh data directory is unpacked from the directory initdb made once, at build time
// (scripts/pglite-seed.ts), and PGlite then resumes it like any other.
import seedPath from "./pglite-seed/datadir.tar.gz" with { type: "file" };
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const MARKER = "PG_VERSION";

/** True when dataDir holds no database yet (PGlite would run initdb). */
export function needsInit(dataDir: string): boolean {
  return !existsSync(join(dataDir, MARKER));
}

/**
 * Unpacks the seed into dataDir (which holds no database). PG_VERSION, the file PGlite looks
 * for to resume, is written last: a start killed half-way leaves a directory without it, and
 * the next start unpacks again over it.
 */
export async function seedDataDir(dataDir: string): Promise<void> {
  const archive = new Bun.Archive(await Bun.file(seedPath).bytes());
  await archive.extract(dataDir, { glob: ["**", `!${MARKER}`, `!/${MARKER}`] });
  await archive.extract(dataDir, { glob: [MARKER, `/${MARKER}`] });
  if (needsInit(dataDir)) throw new Error(`the PGlite seed has no ${MARKER}`);
}

/** Removes what seedDataDir wrote (everything but the files in `keep`), so initdb can run instead. */
export function unseed(dataDir: string, keep: string[]): void {
  for (const name of readdirSync(dataDir)) {
    if (!keep.includes(name)) rmSync(join(dataDir, name), { recursive: true, force: true });
  }
}
