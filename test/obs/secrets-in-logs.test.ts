// Secrets never reach the log: a database error raised by a job write (with the job's target
// Authorization header in the statement's parameters and in the error's message) is logged
// by a real process, and every line it printed is searched for the secret. Start-up errors
// never echo a DATABASE_URL password.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { openPglite } from "../../src/store/pglite-driver.ts";
import { migrate } from "../../src/store/migrate.ts";
import { createDatabase, DRIVERS, dropDatabase } from "../helpers/db.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";

const SECRET = "Bearer sk_live_0123456789abcdefDONOTLOG";
const BODY_SECRET = "card=4242424242424242&cvc=DONOTLOG";

// A trigger that fails the insert the way Postgres fails bad input: the value quoted in the
// message ("invalid input syntax for type integer: \"Bearer …\""), the parameters on the error.
const TRIGGER = `
CREATE FUNCTION test_reject_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM coalesce(NEW.target->'headers'->>'Authorization', NEW.target->'headers'->>'authorization')::int;
  RETURN NEW;
END $$;
CREATE TRIGGER test_reject_job BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION test_reject_job();`;

async function prepare(driver: (typeof DRIVERS)[number]): Promise<{ env: Record<string, string>; cleanup: () => Promise<void> }> {
  if (driver === "postgres") {
    const url = await createDatabase();
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const { openPostgres } = await import("../../src/store/postgres-driver.ts");
    const db = openPostgres({ url, maxConnections: 1 });
    await migrate(db);
    await db.close();
    await sql.unsafe(TRIGGER);
    await sql.end();
    return { env: { DATABASE_URL: url }, cleanup: () => dropDatabase(url) };
  }
  const dir = mkdtempSync(join(tmpdir(), "sched-secrets-"));
  const db = await openPglite({ dataDir: dir });
  await migrate(db);
  await db.exec(TRIGGER);
  await db.close();
  return { env: { SCHEDULER_DATA_DIR: dir }, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

for (const driver of DRIVERS) {
  describe(`secrets in logs (${driver}, real process)`, () => {
    let proc: Proc | undefined;
    let cleanup = async () => {};
    afterAll(async () => {
      kill(proc);
      await proc?.exited;
      await cleanup();
    });

    test("a failed job write is logged without the target's headers, body or the quoted value", async () => {
      const p = await prepare(driver);
      cleanup = p.cleanup;
      proc = await spawnScheduler(["--mode=api"], { ...p.env, LOG_LEVEL: "trace" });
      const r = await api(proc.url, "POST", "/v1/jobs", {
        target: { url: "https://hooks.example.com/x", method: "POST", headers: { Authorization: SECRET }, body: BODY_SECRET },
        delay: "1h",
      });
      expect(r.status).toBe(500);
      expect(JSON.stringify(r.body)).not.toContain("DONOTLOG");
      const line = await proc.waitForLog((l) => l.msg === "request failed");
      // The error is still useful: its code, routine and the redacted message.
      expect(line.err.code).toBe("22P02");
      expect(line.err.message).toContain("invalid input syntax for type integer");
      kill(proc, "SIGTERM");
      await proc.exited;
      const everything =
        proc
          .logs()
          .map((l) => JSON.stringify(l))
          .join("\n") + proc.stderr();
      expect(everything).toContain("request failed");
      expect(everything).not.toContain("DONOTLOG");
      expect(everything).not.toContain("sk_live_0123456789abcdef");
    }, 60_000);
  });
}

describe("start-up errors never show a DATABASE_URL password", () => {
  const PASSWORD = "hunter2-DONOTLOG";
  for (const url of [`mysql://app:${PASSWORD}@db.internal:3306/x`, `postgres://app:${PASSWORD}@127.0.0.1:1/nodb`]) {
    test(url.split(":")[0]!, async () => {
      const p = await spawnScheduler(["--mode=api"], { DATABASE_URL: url, REDIS_URL: `redis://:${PASSWORD}@` }, { waitReady: false });
      const code = await Promise.race([p.exited, Bun.sleep(30_000).then(() => "timeout" as const)]);
      kill(p);
      const out =
        p
          .logs()
          .map((l) => JSON.stringify(l))
          .join("\n") + p.stderr();
      expect(code).not.toBe(0);
      expect(out).toContain(url.startsWith("mysql") ? "DATABASE_URL" : "");
      expect(out).not.toContain(PASSWORD);
    }, 40_000);
  }
});
