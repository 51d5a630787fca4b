import { dlopen, FFIType } from "bun:ffi";
import { closeSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirLockedError extends Error {
  override readonly name = "DataDirLockedError";
}

const LOCK_EX = 2;
const LOCK_NB = 4;

let libc: { symbols: { flock: (fd: number, op: number) => number } } | undefined;
function flock(fd: number, op: number): number {
  libc ??= dlopen(process.platform === "darwin" ? "libc.dylib" : "libc.so.6", {
    flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  });
  return libc.symbols.flock(fd, op);
}

/**
 * Takes an exclusive flock on <dir>/scheduler.lock, or throws DataDirLockedError.
 * A kernel lock, not a PID file: it is released when the holder dies, even by SIGKILL, so a
 * crash never leaves a stale lock behind. Returns the release function.
 */
export function acquireDirLock(dir: string): () => void {
  const path = join(dir, "scheduler.lock");
  const fd = openSync(path, "a+");
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    closeSync(fd);
    throw new DataDirLockedError(
      `data directory ${dir} is in use by another scheduler process; stop it, or give this one its own SCHEDULER_DATA_DIR (or a DATABASE_URL)`,
    );
  }
  writeFileSync(path, `${process.pid}\n`);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    closeSync(fd); // closing the descriptor drops the flock
  };
}
