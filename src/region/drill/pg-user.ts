import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DrillError } from "./errors.ts";
import { run } from "./run.ts";

/**
 * initdb and postgres refuse to run as root. As root the drill runs the PostgreSQL programs
 * as the `postgres` user through runuser, in directories chowned to it, as
 * scripts/services.sh (_services_as_pg) does; otherwise as the current user.
 */
export class PgUser {
  private constructor(
    readonly asRoot: boolean,
    private readonly ids?: { uid: number; gid: number },
  ) {}

  static async detect(): Promise<PgUser> {
    if (process.getuid?.() !== 0) return new PgUser(false);
    if (!Bun.which("runuser"))
      throw new DrillError(
        "running as root: initdb refuses root and runuser (util-linux) is not installed to run it as the postgres user; install util-linux or run the drill as a non-root user",
      );
    const uid = await run(["id", "-u", "postgres"]);
    const gid = await run(["id", "-g", "postgres"]);
    if (uid.code !== 0 || gid.code !== 0)
      throw new DrillError(
        "running as root: initdb refuses root and there is no 'postgres' user to run it as (Debian's postgresql package creates it); create one or run the drill as a non-root user",
      );
    return new PgUser(true, { uid: Number(uid.output), gid: Number(gid.output) });
  }

  /** The command, wrapped to run as the postgres user when we are root. */
  cmd(argv: string[]): string[] {
    return this.asRoot ? ["runuser", "-u", "postgres", "--", ...argv] : argv;
  }

  /** Gives a path we created to the postgres user (no-op unless root). */
  own(path: string): void {
    if (this.ids) chownSync(path, this.ids.uid, this.ids.gid);
  }

  /**
   * A fresh temp dir the postgres user can write: under $TMPDIR, else /tmp (as root,
   * $TMPDIR may be somewhere postgres cannot reach, e.g. under /root).
   */
  async makeTempDir(prefix: string): Promise<string> {
    for (const base of [...new Set([tmpdir(), "/tmp"])]) {
      let dir: string;
      try {
        dir = mkdtempSync(join(base, prefix));
      } catch {
        continue;
      }
      if (!this.asRoot) return dir;
      try {
        this.own(dir);
        if ((await run(this.cmd(["test", "-w", dir]))).code === 0) return dir;
      } catch {
        // fall through to the next base
      }
      rmSync(dir, { recursive: true, force: true });
    }
    throw new DrillError(`could not create a temp dir the postgres user can write (tried ${tmpdir()} and /tmp)`);
  }
}
