import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import postgres from "postgres";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { holdRowLock } from "../helpers/row-lock.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");

function run(args: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { env: { PATH: process.env.PATH ?? "", ...env }, stdin: "ignore" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe("command line", () => {
  test("--help shows usage with real examples; --version the version", () => {
    const h = run(["--help"]);
    expect(h.code).toBe(0);
    expect(h.out).toContain("--mode=all|api|dispatcher|worker");
    expect(h.out).toContain("scheduler migrate");
    expect(h.out).toContain("curl -X POST");
    const v = run(["--version"]);
    expect(v.code).toBe(0);
    expect(v.out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  test.each([
    [{ WORKER_CONCURRENCY: "lots" }, "WORKER_CONCURRENCY"],
    [{ PORT: "99999" }, "PORT"],
    [{ DATABASE_URL: "mysql://x" }, "DATABASE_URL"],
    [{ SCHEDULER_SIGNING_SECRET: "nope" }, "SCHEDULER_SIGNING_SECRET"],
    [{ SCHEDULER_TOKENS: "abc" }, "SCHEDULER_TOKENS"],
    [{ SCHEDULER_TOKENS: "t:acme:jobs:delete" }, "SCHEDULER_TOKENS"],
    [{ SCHEDULER_TOKENS: "a-31-character-token-0000000000:acme:jobs:read" }, "SCHEDULER_TOKENS"],
    [{ SCHEDULER_SIGNING_SECRET: "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRY=" }, "SCHEDULER_SIGNING_SECRET"],
    [{ SCHEDULER_CLIENT_IP_HEADER: "fly-client-ip" }, "SCHEDULER_TRUSTED_PROXIES"],
    [{ SCHEDULER_TRUSTED_PROXIES: "10.0.0.0/33" }, "SCHEDULER_TRUSTED_PROXIES"],
    [{ SCHEDULER_LEASE_TTL: "soon" }, "SCHEDULER_LEASE_TTL"],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
    [{ LOG_FORMAT: "colour" }, "LOG_FORMAT"],
    [{ UPSTASH_REDIS_REST_URL: "https://x.upstash.io" }, "UPSTASH_REDIS_REST_TOKEN"],
    [{ SCHEDULER_PRESTAGE: "2m" }, "SCHEDULER_PRESTAGE"],
    [{ SCHEDULER_RESERVED_SLOTS: "many" }, "SCHEDULER_RESERVED_SLOTS"],
    [{ SCHEDULER_RESERVED_SLOTS: "100:1", WORKER_CONCURRENCY: "100" }, "SCHEDULER_RESERVED_SLOTS"],
  ] as [Record<string, string>, string][])("bad configuration %p exits non-zero with one line naming %s", (env, name) => {
    const r = run([], env);
    expect(r.code).not.toBe(0);
    const lines = r.err.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(name);
  });

  test("several problems: all of them at once, one line each; an unknown SCHEDULER_* name with the nearest valid one", () => {
    const r = run(["--mode=everything"], { PORT: "http", WORKER_CONCURRENCY: "0", SCHEDULER_POLL_INTERVALL: "1s", SCHEDULER_TOKENS: "abc" });
    expect(r.code).toBe(2);
    const lines = r.err.trim().split("\n");
    expect(lines).toHaveLength(5);
    for (const line of lines) expect(line).toStartWith("scheduler: ");
    for (const name of ["--mode", "PORT", "WORKER_CONCURRENCY", "SCHEDULER_POLL_INTERVALL", "SCHEDULER_TOKENS"])
      expect(lines.some((l) => l.startsWith(`scheduler: ${name} `))).toBe(true);
    expect(r.err).toContain("did you mean SCHEDULER_POLL_INTERVAL?");
  });

  test("an unknown flag, mode or command is one line pointing at --help", () => {
    for (const args of [["--nope"], ["--mode=everything"], ["frobnicate"]]) {
      const r = run(args);
      expect(r.code).toBe(2);
      expect(r.err.trim().split("\n")).toHaveLength(1);
    }
  });

  test("migrate applies the migrations once, then says the database is up to date", async () => {
    const url = await createDatabase();
    try {
      const first = run(["migrate"], { DATABASE_URL: url });
      expect(first.code).toBe(0);
      expect(first.out).toContain("applied: 001_jobs");
      const second = run(["migrate"], { DATABASE_URL: url });
      expect(second.code).toBe(0);
      expect(second.out).toContain("up to date");
    } finally {
      await dropDatabase(url);
    }
  });

  test("migrate behind another client's lock on a table it changes: one line on stderr per retry, then applied (the defaults: 2 s a try)", async () => {
    const url = await createDatabase({ migrated: true });
    // 033 again (ALTER TABLE jobs SET (fillfactor = 50): the same result applied twice), as if
    // it were new: it needs a lock on jobs that a SHARE lock of another client holds off.
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await admin.unsafe("DELETE FROM scheduler_migrations WHERE version = 33");
    await admin.end();
    const holder = await holdRowLock(url, "LOCK TABLE jobs IN SHARE MODE", []);
    try {
      const child = Bun.spawn([process.execPath, MAIN, "migrate"], {
        env: { PATH: process.env.PATH ?? "", DATABASE_URL: url },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const reader = child.stderr.getReader();
      let err = "";
      // The first try gives up after its 2 s; its line comes before the 1 s pause.
      while (!err.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        err += new TextDecoder().decode(value);
      }
      await holder.release();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        err += new TextDecoder().decode(value);
      }
      expect(await child.exited).toBe(0);
      expect(err).toBe("scheduler: migration 033_jobs_fillfactor waited too long for a table another transaction holds; trying again (2 of 10)\n");
      expect(await new Response(child.stdout).text()).toBe("applied: 033_jobs_fillfactor\n");
    } finally {
      await holder.release();
      await dropDatabase(url);
    }
  }, 30_000);

  test("a port already in use is one line that says what to do", async () => {
    const url = await createDatabase({ migrated: true });
    const busy = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
    try {
      const r = run([], { DATABASE_URL: url, HOST: "127.0.0.1", PORT: String(busy.port) });
      expect(r.code).toBe(2);
      expect(r.err.trim().split("\n")).toHaveLength(1);
      expect(r.err).toContain(`Is port ${busy.port} in use?`);
      expect(r.err).toContain("pick another port with PORT=8081 or --port=8081");
    } finally {
      busy.stop(true);
      await dropDatabase(url);
    }
  }, 30_000);

  test("an unreachable database is one line that says what to do", () => {
    const r = run(["migrate"], { DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" });
    expect(r.code).not.toBe(0);
    expect(r.err.trim().split("\n")).toHaveLength(1);
    expect(r.err).toContain("DATABASE_URL");
  });
});
