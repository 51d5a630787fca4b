import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { DrillError } from "./errors.ts";

/** The server programs the drill runs. */
export const PG_PROGRAMS = ["initdb", "pg_ctl", "postgres", "pg_basebackup"] as const;

const NOT_FOUND = "initdb not found: install the PostgreSQL server (Debian: apt-get install postgresql) or pass --pg-bin";

function isExecutable(path: string): boolean {
  try {
    return statSync(path).isFile() && (statSync(path).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

const missingIn = (dir: string) => PG_PROGRAMS.filter((p) => !isExecutable(join(dir, p)));

/**
 * The directory holding initdb, pg_ctl, postgres and pg_basebackup: `--pg-bin`, else
 * $PG_BIN, else where `initdb` on PATH really lives (Debian links only a few programs into
 * /usr/local/bin or /usr/bin, so the link is followed), else the newest
 * /usr/lib/postgresql/N/bin. Throws a one-line DrillError otherwise.
 */
export function findPgBin(flag: string | undefined, env: Record<string, string | undefined> = process.env, root = "/usr/lib/postgresql"): string {
  const explicit = flag ?? (env.PG_BIN ? env.PG_BIN : undefined);
  if (explicit !== undefined) {
    const missing = missingIn(explicit);
    if (missing.length > 0) {
      const from = flag !== undefined ? "--pg-bin" : "PG_BIN";
      throw new DrillError(`${from}=${explicit} has no ${missing.join(", ")}: point it at the PostgreSQL server's bin directory`);
    }
    return explicit;
  }
  const candidates: string[] = [];
  const onPath = Bun.which("initdb", env.PATH !== undefined ? { PATH: env.PATH } : undefined);
  if (onPath) {
    try {
      candidates.push(dirname(realpathSync(onPath)));
    } catch {
      // a dangling link: fall through
    }
    candidates.push(dirname(onPath));
  }
  candidates.push(...newestVersionsFirst(root).map((v) => join(root, v, "bin")));
  for (const dir of candidates) if (missingIn(dir).length === 0) return dir;
  // initdb somewhere but not next to pg_basebackup: say what is missing rather than "not found".
  const partial = candidates.find((dir) => isExecutable(join(dir, "initdb")));
  if (partial) throw new DrillError(`${partial} has initdb but no ${missingIn(partial).join(", ")}: pass --pg-bin=DIR with the full PostgreSQL server`);
  throw new DrillError(NOT_FOUND);
}

function newestVersionsFirst(root: string): string[] {
  if (!existsSync(root)) return [];
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const num = (s: string) => s.split(".").map((x) => Number(x) || 0);
  return names
    .filter((n) => /^\d+(\.\d+)*$/.test(n))
    .sort((a, b) => {
      const x = num(a),
        y = num(b);
      for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
      return 0;
    });
}
