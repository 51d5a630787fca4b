import { describe, expect, test } from "bun:test";
import postgres from "postgres";
import { postgresCpuSeconds, postgresKind, postgresPerJob, postmasterOf } from "../../bench/lib/postgres-cpu.ts";

// bench:peers' PostgreSQL rows (bench/README.md, part 21): the server's CPU split by its processes.
describe("PostgreSQL CPU by process", () => {
  test("processes are told apart by their titles", () => {
    expect(postgresKind("postgres: postgres bench_1 127.0.0.1(41234) idle")).toBe("backends");
    expect(postgresKind("postgres: app db [local] UPDATE")).toBe("backends");
    expect(postgresKind("postgres: walwriter ")).toBe("walwriter");
    expect(postgresKind("postgres: autovacuum launcher ")).toBe("autovacuum");
    expect(postgresKind("postgres: autovacuum worker bench_1")).toBe("autovacuum");
    expect(postgresKind("postgres: checkpointer ")).toBe("background");
    expect(postgresKind("postgres: background writer ")).toBe("background");
    expect(postgresKind("postgres: logical replication launcher ")).toBe("other");
  });

  test("a pid that is not a backend of this connection: no postmaster", () => {
    expect(postmasterOf(process.pid, null)).toBeUndefined();
    expect(postmasterOf(2 ** 30, 5432)).toBeUndefined();
  });

  test("per job: µs of each part between two readings", () => {
    const zero = { backends: 0, walwriter: 0, autovacuum: 0, background: 0, other: 0, exited: 0 };
    const r = postgresPerJob(zero, { ...zero, backends: 0.1, walwriter: 0.002 }, 1000);
    expect(r.backends).toBeCloseTo(100, 6);
    expect(r.walwriter).toBeCloseTo(2, 6);
    expect(r.exited).toBe(0);
  });

  test("the test server: a statement's work shows in its backends", async () => {
    const sql = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    try {
      const [{ pid, port }] = await sql<{ pid: number; port: number | null }[]>`SELECT pg_backend_pid() AS pid, inet_client_port() AS port`;
      const pm = postmasterOf(pid, port);
      // A server on loopback is a process of this machine; one named elsewhere in TEST_DATABASE_URL is not read.
      const host = new URL(process.env.TEST_DATABASE_URL!).hostname;
      if (!["127.0.0.1", "localhost", "[::1]", ""].includes(host)) {
        expect(pm).toBeUndefined();
        return;
      }
      expect(pm).toBeNumber();
      if (pm === undefined) return;
      const before = postgresCpuSeconds(pm)!;
      // ~0.3 s of one backend's CPU however busy the machine is: a loop read until /proc shows it.
      let after = before;
      const deadline = Date.now() + 30_000;
      while (after.backends - before.backends < 0.2 && Date.now() < deadline) {
        await sql`SELECT count(*) FROM generate_series(1, 2000000)`;
        after = postgresCpuSeconds(pm)!;
      }
      expect(after.backends - before.backends).toBeGreaterThanOrEqual(0.2);
      expect(after.walwriter).toBeGreaterThanOrEqual(before.walwriter);
    } finally {
      await sql.end();
    }
  });
});
