// A connection's backend dying under a transaction must cost that transaction, never the
// process. postgres.js 3.4.9 threw an uncatchable TypeError (a write to the null socket of
// the closed connection, from a setImmediate: porsager/postgres#1066, #1154, #1208) when
// sql.begin() issued its own ROLLBACK, or the transaction's code another query, after the
// backend was terminated or the server restarted; patches/postgres+3.4.9.patch fixes it.
// Each case runs our driver in a child process (connection-loss-child.ts) so that such a
// crash is seen as that process's exit code, not as this test runner dying, and forces the
// loss itself: pg_terminate_backend once the statement is seen running in
// pg_stat_activity, or a fast/immediate restart of a throwaway server of this test's own
// while a transaction's statement is seen running there.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { findPgBin } from "../../src/region/drill/pg-bin.ts";
import { PgCluster } from "../../src/region/drill/pg-cluster.ts";
import { PgUser } from "../../src/region/drill/pg-user.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { eventually } from "../helpers/target.ts";

const CHILD = join(import.meta.dir, "connection-loss-child.ts");

interface Child {
  proc: Bun.Subprocess<"pipe", "pipe", "pipe">;
  lines: Record<string, any>[];
  stderr: () => string;
  exited: Promise<number>;
  /** What it printed, for failure messages. */
  output: () => string;
}

function spawnChild(scenario: string, databaseUrl: string): Child {
  const proc = Bun.spawn([process.execPath, CHILD, scenario], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", DATABASE_URL: databaseUrl },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: Record<string, any>[] = [];
  let err = "";
  let raw = "";
  const reading = (async () => {
    let buf = "";
    for await (const chunk of proc.stdout) {
      buf += new TextDecoder().decode(chunk);
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        raw += `${line}\n`;
        try {
          lines.push(JSON.parse(line));
        } catch {
          // not one of its JSON lines
        }
      }
    }
  })();
  const errReading = (async () => {
    for await (const chunk of proc.stderr) err += new TextDecoder().decode(chunk);
  })();
  // The exit code only once everything it printed has been read.
  const exited = proc.exited.then(async (code) => {
    await Promise.all([reading, errReading]);
    return code;
  });
  return { proc, lines, stderr: () => err, exited, output: () => `stdout:\n${raw}\nstderr:\n${err.slice(-3000)}` };
}

/** Its exit code, or a failure naming what it printed when it does not exit in time. */
async function exitOf(child: Child, ms: number): Promise<number> {
  const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), ms));
  const code = await Promise.race([child.exited, timeout]);
  if (code === "timeout") {
    child.proc.kill("SIGKILL");
    throw new Error(`the child did not exit within ${ms} ms\n${child.output()}`);
  }
  return code;
}

describe("a transaction's backend terminated (pg_terminate_backend)", () => {
  let url: string;
  beforeAll(async () => {
    url = await createDatabase();
  });
  afterAll(async () => {
    if (url) await dropDatabase(url);
  });

  test("mid-statement: db.tx rejects with CONNECTION_CLOSED, the process lives, the pool serves the next queries", async () => {
    const child = spawnChild("tx-killed-mid-statement", url);
    const code = await exitOf(child, 30_000);
    expect(code, child.output()).toBe(0);
    expect(child.stderr()).not.toContain("TypeError");
    expect(child.lines.find((l) => l.step === "tx settled")).toMatchObject({ ok: false, code: "CONNECTION_CLOSED", statement: "CONNECTION_CLOSED" });
    expect(child.lines.map((l) => l.step)).toEqual(["tx settled", "pool serves", "done"]);
  });

  test("between statements: the transaction's next statement on its dead handle rejects too; the process lives", async () => {
    const child = spawnChild("tx-killed-between-statements", url);
    const code = await exitOf(child, 30_000);
    expect(code, child.output()).toBe(0);
    expect(child.stderr()).not.toContain("TypeError");
    expect(child.lines.find((l) => l.step === "tx settled")).toMatchObject({ ok: false, code: "CONNECTION_CLOSED", late: "CONNECTION_CLOSED" });
    expect(child.lines.map((l) => l.step)).toEqual(["tx settled", "pool serves", "done"]);
  });

  test("a dead transaction's handle used after the pool reconnected its connection: rejected, nothing runs outside the transaction", async () => {
    const child = spawnChild("tx-handle-after-reconnect", url);
    const code = await exitOf(child, 30_000);
    expect(code, child.output()).toBe(0);
    expect(child.lines.find((l) => l.step === "tx settled")).toMatchObject({
      ok: false,
      code: "CONNECTION_CLOSED",
      late: "CONNECTION_CLOSED",
      reconnectedPid: true,
      rows: 0,
    });
    expect(child.lines.map((l) => l.step)).toEqual(["tx settled", "pool serves", "done"]);
  });
});

describe("PostgreSQL restarted under a loop of transactions", () => {
  let user: PgUser;
  let pg: PgCluster;
  let dir = "";
  let admin: postgres.Sql | undefined;

  beforeAll(async () => {
    user = await PgUser.detect();
    dir = await user.makeTempDir("scheduler-connloss-");
    pg = new PgCluster({ name: "connloss", bin: findPgBin(undefined), user, dataDir: join(dir, "pg"), socketDir: dir, logFile: join(dir, "postgres.log") });
    await pg.initdb();
    // authentication_timeout: a stop waits for children refusing connections ("shutting
    // down") until the client's startup packet or this timeout.
    pg.appendConf({ listen_addresses: "127.0.0.1", unix_socket_directories: dir, fsync: "off", authentication_timeout: "2s" });
    await pg.start();
  });
  afterAll(async () => {
    await admin?.end({ timeout: 1 });
    await pg?.stop("immediate").catch(() => pg.stopSync());
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The child's long transaction, seen running its statement on the server. */
  async function longStatementRunning(): Promise<void> {
    await eventually(
      async () => {
        try {
          admin ??= postgres(pg.url(), { max: 1, onnotice: () => {}, connect_timeout: 2, idle_timeout: 1 });
          const rows =
            await admin`select 1 from pg_stat_activity where application_name = 'conn-loss-child' and state = 'active' and xact_start is not null and query like '%pg_sleep(30)%'`;
          return rows.length > 0;
        } catch {
          // the server is still coming back
          return false;
        }
      },
      15_000,
      "the child's long transaction to be mid-statement",
    );
  }

  test("fast and immediate restarts: the process survives and its transactions succeed again after each", async () => {
    const child = spawnChild("tx-loop", pg.url());
    try {
      const port = pg.port;
      for (const mode of ["fast", "immediate"] as const) {
        await longStatementRunning();
        const lostBefore = child.lines.filter((l) => l.step === "long tx lost").length;
        await admin?.end({ timeout: 1 });
        admin = undefined;
        await pg.stop(mode);
        await Bun.sleep(200);
        await pg.start({ port });
        expect(pg.port).toBe(port);
        // Transactions succeed again on the restarted server (and the process is alive):
        // counted from here, none of them ran before the stop.
        const okBefore = child.lines.filter((l) => l.step === "ok").length;
        const upAt = Date.now();
        await eventually(
          () => {
            if (child.proc.exitCode !== null) throw new Error(`the child exited with code ${child.proc.exitCode} after the ${mode} restart\n${child.output()}`);
            return child.lines.filter((l) => l.step === "ok").length >= okBefore + 10;
          },
          15_000,
          `transactions to succeed after the ${mode} restart`,
        );
        // Reconnects back off at most a second (postgres-driver.ts), not the driver's 20 s.
        expect(Date.now() - upAt).toBeLessThan(5_000);
        // The transaction that was mid-statement at the stop was lost, catchably.
        expect(child.lines.filter((l) => l.step === "long tx lost").length).toBeGreaterThan(lostBefore);
      }
      child.proc.stdin.write("stop\n");
      await child.proc.stdin.flush();
      const code = await exitOf(child, 20_000);
      expect(code, child.output()).toBe(0);
      expect(child.stderr()).not.toContain("TypeError");
      // An exception nothing caught would have ended the scheduler (a lost connection's
      // rejection is logged by its guard, as the "guard" lines show).
      expect(child.lines.filter((l) => l.step === "uncaught exception")).toEqual([]);
      const summary = child.lines.find((l) => l.step === "stopped");
      expect(summary?.ok).toBeGreaterThan(20);
      expect(child.lines.at(-1)?.step).toBe("done");
    } finally {
      child.proc.kill("SIGKILL");
    }
  });
});
