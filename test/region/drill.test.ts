// `scheduler drill failover`: its parts (arguments, PostgreSQL discovery, the target, the
// analysis, the report, primary/standby management), then the real CLI end to end. The
// drill starts its own PostgreSQL clusters (PG_BIN from scripts/test.sh, else found as the
// drill finds it), so it needs the PostgreSQL server binaries, not a DATABASE_URL.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { analyze } from "../../src/region/drill/analyze.ts";
import { parseDrillArgs } from "../../src/region/drill/args.ts";
import { Cleanup } from "../../src/region/drill/cleanup.ts";
import type { JobRecord } from "../../src/region/drill/load.ts";
import { dueOffsetMs } from "../../src/region/drill/load.ts";
import { findPgBin } from "../../src/region/drill/pg-bin.ts";
import { PgCluster, waitForStandby } from "../../src/region/drill/pg-cluster.ts";
import { PgUser } from "../../src/region/drill/pg-user.ts";
import { formatReport, type DrillReport } from "../../src/region/drill/report.ts";
import { DrillTarget, type TargetCall } from "../../src/region/drill/target.ts";

const ROOT = join(import.meta.dir, "..", "..");
const G = 2n ** 32n;

describe("drill arguments", () => {
  test("defaults, flags, and one-line errors", () => {
    expect(parseDrillArgs([])).toEqual({ jobs: 200, sync: false, json: undefined, pgBin: undefined, help: false });
    expect(parseDrillArgs(["failover", "--jobs=40", "--sync", "--json=/tmp/r.json", "--pg-bin=/opt/pg/bin"])).toEqual({
      jobs: 40,
      sync: true,
      json: "/tmp/r.json",
      pgBin: "/opt/pg/bin",
      help: false,
    });
    expect(parseDrillArgs(["--help"]).help).toBe(true);
    expect(() => parseDrillArgs(["--jobs=0"])).toThrow("--jobs must be a whole number");
    expect(() => parseDrillArgs(["--jobs=ten"])).toThrow("--jobs must be a whole number");
    expect(() => parseDrillArgs(["--bogus"])).toThrow();
    expect(() => parseDrillArgs(["failover", "extra"])).toThrow('unexpected argument "extra"');
  });

  test("due offsets spread over [min, max] without clumps", () => {
    const offs = Array.from({ length: 200 }, (_, i) => dueOffsetMs(i, 1000, 15_000));
    expect(Math.min(...offs)).toBeGreaterThanOrEqual(1000);
    expect(Math.max(...offs)).toBeLessThanOrEqual(15_000);
    // Each of 7 two-second buckets gets a fair share.
    for (let b = 0; b < 7; b++) expect(offs.filter((o) => o >= 1000 + b * 2000 && o < 3000 + b * 2000).length).toBeGreaterThan(20);
  });
});

describe("finding the PostgreSQL server", () => {
  test("--pg-bin without the programs says which are missing", () => {
    const dir = mkdtempSync(join(tmpdir(), "drill-nopg-"));
    try {
      expect(() => findPgBin(dir, {})).toThrow(`--pg-bin=${dir} has no initdb, pg_ctl, postgres, pg_basebackup`);
      expect(() => findPgBin(undefined, { PG_BIN: dir })).toThrow(`PG_BIN=${dir} has no initdb`);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  test("nothing anywhere: the one-line install hint", () => {
    expect(() => findPgBin(undefined, { PATH: "/nonexistent" }, "/nonexistent")).toThrow(
      "initdb not found: install the PostgreSQL server (Debian: apt-get install postgresql) or pass --pg-bin",
    );
  });

  test("an initdb on PATH that is a link (Debian's /usr/local/bin) leads to the real bin dir", () => {
    const real = findPgBin(undefined);
    const linkDir = mkdtempSync(join(tmpdir(), "drill-pglink-"));
    try {
      Bun.spawnSync(["ln", "-s", join(real, "initdb"), join(linkDir, "initdb")]);
      expect(findPgBin(undefined, { PATH: linkDir }, "/nonexistent")).toBe(real);
    } finally {
      rmSync(linkDir, { recursive: true });
    }
  });
});

describe("the drill's webhook target", () => {
  test("keeps the highest fencing token and refuses lower ones with 409", async () => {
    const t = new DrillTarget();
    try {
      const call = (token: bigint | null, extra: Record<string, string> = {}) =>
        fetch(`${t.url}/j/1`, {
          method: "POST",
          headers: { "idempotency-key": "k", ...(token === null ? {} : { "scheduler-fencing-token": String(token) }), ...extra },
          body: "{}",
        }).then((r) => r.status);
      expect(await call(5n, { "scheduler-scheduled-for": "2030-01-01T00:00:00.000Z", "webhook-id": "w1", "scheduler-catchup": "true" })).toBe(200);
      expect(await call(3n)).toBe(409);
      expect(await call(5n)).toBe(200);
      expect(await call(G + 1n)).toBe(200);
      expect(await call(7n)).toBe(409);
      expect(await call(G + 1n)).toBe(200);
      expect(t.calls.map((c) => c.accepted)).toEqual([true, false, true, true, false, true]);
      expect(t.highest).toBe(G + 1n);
      expect(t.refused).toBe(2);
      const first = t.calls[0];
      expect(first).toMatchObject({ path: "/j/1", key: "k", webhookId: "w1", token: 5n, catchup: true, scheduledFor: Date.parse("2030-01-01T00:00:00Z") });
    } finally {
      t.stop();
    }
  });
});

describe("the drill's analysis", () => {
  const call = (c: Partial<TargetCall> & { at: number; key: string; token: bigint }): TargetCall => ({
    path: c.key.startsWith("drill-tick") ? "/s" : `/j/${c.key}`,
    webhookId: `w-${c.key}`,
    scheduledFor: null,
    nominalTime: null,
    catchup: false,
    attempt: 1,
    accepted: true,
    ...c,
  });
  const job = (i: number, runAt: number, acked = true): JobRecord => ({
    i,
    key: `drill-${i}`,
    runAt,
    firstAttemptAt: 0,
    ackAt: acked ? 1 : null,
    ackStatus: acked ? 201 : null,
    ackRegion: "a",
    attempts: 1,
    lastError: null,
    rejected: null,
  });
  const killAt = 1000;
  const jobs = [job(0, 500), job(1, 800), job(2, 2000), job(3, 3000), job(4, 6000), job(5, 6000), job(6, 9000, false)];
  const calls: TargetCall[] = [
    call({ at: 600, key: "drill-0", token: 3n, scheduledFor: 500 }),
    call({ at: 900, key: "drill-1", token: 3n }), // called just before the kill…
    call({ at: 900, key: "drill-tick@t0", token: 3n }),
    call({ at: 5000, key: "drill-1", token: G + 1n }), // …and again by region b: at-least-once
    call({ at: 5050, key: "drill-tick@t1", token: G + 1n, catchup: true }),
    call({ at: 5100, key: "drill-2", token: G + 1n, scheduledFor: 2000 }),
    call({ at: 6000, key: "drill-tick@t2", token: G + 1n }),
    call({ at: 6000, key: "drill-4", token: G + 1n }),
    call({ at: 6100, key: "drill-4", token: G + 1n }), // a real duplicate
    call({ at: 5990, key: "drill-5", token: G + 1n, scheduledFor: 6000 }), // early
    call({ at: 10_100, key: "drill-3", token: 3n, accepted: false }), // the old home, refused
  ];

  test("lost, duplicates vs redelivery after the crash, early, rto, outage, misfire, old home", () => {
    const a = analyze({ calls, jobs, schedulePath: "/s", killAt, newGeneration: 1, oldRegionFrom: 10_000 });
    expect(a).toMatchObject({
      jobs_created: 7,
      jobs_acknowledged: 6,
      jobs_delivered: 5,
      lost: 1,
      lost_keys: ["drill-3"],
      duplicates_accepted: 1,
      duplicate_keys: ["drill-4"],
      redelivered_after_crash: 1,
      redelivered_keys: ["drill-1"],
      early: 1,
      early_keys: ["drill-5"],
      stale_refused: 1,
      rto_ms: 4000,
      due_before_kill: 2,
      outage_due: 2,
      outage_due_delivered: 1, // drill-2 late, drill-3 never
      catchup_runs: 1,
      ticks_before_kill: 1,
      ticks_after_takeover: 1,
      misfire_ok: false,
      old_region_calls: 1,
      old_region_accepted: 0,
      passed: false,
    });
  });

  test("a clean run passes; two catch-ups or an accepted old-home call fail it", () => {
    const clean = calls.filter((c) => !(c.key === "drill-4" && c.at === 6100) && c.key !== "drill-5");
    clean.push(call({ at: 5200, key: "drill-3", token: G + 1n }), call({ at: 6100, key: "drill-5", token: G + 1n, scheduledFor: 6000 }));
    const ok = analyze({ calls: clean, jobs, schedulePath: "/s", killAt, newGeneration: 1, oldRegionFrom: 10_000 });
    expect(ok).toMatchObject({ lost: 0, duplicates_accepted: 0, early: 0, misfire_ok: true, passed: true, redelivered_after_crash: 1 });
    const twoCatchups = analyze({
      calls: [...clean, call({ at: 5060, key: "drill-tick@t1b", token: G + 1n, catchup: true })],
      jobs,
      schedulePath: "/s",
      killAt,
      newGeneration: 1,
      oldRegionFrom: 10_000,
    });
    expect(twoCatchups).toMatchObject({ catchup_runs: 2, misfire_ok: false, passed: false });
    const oldAccepted = analyze({
      calls: [...clean, call({ at: 10_200, key: "drill-0", token: 9n })],
      jobs,
      schedulePath: "/s",
      killAt,
      newGeneration: 1,
      oldRegionFrom: 10_000,
    });
    expect(oldAccepted).toMatchObject({ old_region_calls: 2, old_region_accepted: 1, passed: false });
  });

  test("the report table names every criterion", () => {
    const a = analyze({ calls, jobs, schedulePath: "/s", killAt, newGeneration: 1, oldRegionFrom: 10_000 });
    const r: DrillReport = {
      drill: "failover",
      ...a,
      sync: true,
      jobs_requested: 7,
      started_at: "",
      finished_at: "",
      generation_before: 0,
      generation_after: 1,
      promote_ms: 200,
      takeover_ms: 3900,
      takeover: null,
      create_requests: 9,
      create_retries: { connection: 2 },
      phases_ms: { postgres: 1500 },
      postgres: { version: "15.2", bin: "/x" },
      machine: { cpu_model: "cpu", cores: 2, memory_gb: 4, os: "linux", bun: "1" },
      notes: ["a note"],
      error: null,
      logs_dir: null,
    };
    const text = formatReport(r);
    expect(text.split("\n")[0]).toContain("FAILED");
    for (const s of [
      "lost (acknowledged, never accepted)",
      "duplicates accepted",
      "early",
      "stale calls refused",
      "of which accepted",
      "misfire policy kept",
      "RTO: kill → first call accepted from region b",
      "4000 ms",
      "lost: drill-3",
      "duplicates: drill-4",
      "a note",
      "postgres",
    ]) {
      expect(text).toContain(s);
    }
  });
});

describe("undo steps", () => {
  test("run newest first, each once, whatever the others do", async () => {
    const c = new Cleanup();
    const order: string[] = [];
    c.add("a", () => void order.push("a"));
    c.add("b", () => {
      order.push("b");
      throw new Error("boom");
    });
    const runC = c.add("c", () => void order.push("c"));
    await runC();
    expect(await c.run()).toEqual(["b: boom"]);
    expect(await c.run()).toEqual([]);
    expect(order).toEqual(["c", "b", "a"]);
  });
});

describe("primary and streaming standby (real PostgreSQL)", () => {
  test("sync standby, immediate stop, promotion, and the old primary back on its own", async () => {
    const bin = findPgBin(undefined);
    const user = await PgUser.detect();
    const dir = await user.makeTempDir("drill-pgtest-");
    const mk = (name: string) => new PgCluster({ name, bin, user, dataDir: join(dir, name), socketDir: dir, logFile: join(dir, `${name}.log`) });
    const primary = mk("primary");
    const standby = mk("standby");
    try {
      await primary.initdb();
      primary.appendConf({
        listen_addresses: "127.0.0.1",
        unix_socket_directories: dir,
        wal_level: "replica",
        max_wal_senders: 5,
        hot_standby: "on",
        fsync: "off",
      });
      await primary.start();
      await primary.sql("create database scheduler");
      await standby.basebackupFrom(primary, "standby");
      await standby.start();
      await primary.sql("alter system set synchronous_standby_names = 'standby'");
      await primary.sql("select pg_reload_conf()");
      await waitForStandby(primary, "standby", true);
      expect(await standby.inRecovery()).toBe(true);
      // A synchronous commit is on the standby once acknowledged.
      await primary.sql("create table t (x int)", "scheduler");
      await primary.sql("insert into t values (1)", "scheduler");
      expect(await standby.sql("select x from t", "scheduler")).toEqual([{ x: 1 }]);

      await primary.stopImmediate();
      expect(primary.mayRun).toBe(false);
      await standby.promote();
      expect(await standby.inRecovery()).toBe(false);
      await standby.sql("insert into t values (2)", "scheduler");

      // The old primary comes back where it was, as an independent primary: split brain.
      const port = primary.port;
      await primary.start({ port, settings: { synchronous_standby_names: "" } });
      expect(primary.port).toBe(port);
      expect(await primary.inRecovery()).toBe(false);
      await primary.sql("insert into t values (3)", "scheduler");
      expect(await primary.sql("select x from t order by x", "scheduler")).toEqual([{ x: 1 }, { x: 3 }]);
      expect(await standby.sql("select x from t order by x", "scheduler")).toEqual([{ x: 1 }, { x: 2 }]);
    } finally {
      await standby.stopImmediate().catch(() => standby.stopSync());
      await primary.stopImmediate().catch(() => primary.stopSync());
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("scheduler drill failover (the real CLI)", () => {
  test("--sync: nothing lost, duplicated, early or accepted from the old home; misfire kept; everything removed", async () => {
    const drillDirs = () =>
      new Set(
        [...new Set([tmpdir(), "/tmp"])].flatMap((d) =>
          readdirSync(d)
            .filter((n) => n.startsWith("scheduler-drill-"))
            .map((n) => join(d, n)),
        ),
      );
    const before = drillDirs();
    const out = mkdtempSync(join(tmpdir(), "drill-report-"));
    const file = join(out, "report.json");
    try {
      const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "drill", "failover", "--jobs=40", "--sync", `--json=${file}`], {
        cwd: ROOT,
        env: process.env,
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const t0 = Date.now();
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      const elapsed = Date.now() - t0;
      const context = `exit ${code} after ${elapsed} ms\n--- stderr\n${stderr.slice(-3000)}\n--- stdout\n${stdout}`;
      expect(code, context).toBe(0);
      expect(stdout).toContain("scheduler drill failover: PASSED");
      const r = JSON.parse(readFileSync(file, "utf8")) as DrillReport;
      expect(r, context).toMatchObject({
        passed: true,
        sync: true,
        lost: 0,
        duplicates_accepted: 0,
        early: 0,
        old_region_accepted: 0,
        misfire_ok: true,
        error: null,
        logs_dir: null,
      });
      expect(r.jobs_created).toBe(40);
      expect(r.jobs_acknowledged, context).toBe(40);
      expect(r.jobs_delivered).toBe(40);
      expect(r.stale_refused, context).toBeGreaterThanOrEqual(1);
      expect(r.old_region_calls).toBeGreaterThanOrEqual(1);
      expect(r.rto_ms!).toBeGreaterThan(0);
      expect(r.rto_ms!, context).toBeLessThan(20_000);
      expect(r.generation_after!).toBeGreaterThan(r.generation_before ?? -1);
      expect(r.catchup_runs).toBeLessThanOrEqual(1);
      expect(r.ticks_after_takeover).toBeGreaterThanOrEqual(1);
      expect(r.machine.cores).toBeGreaterThan(0);
      // Every scheduler process it started is gone, and so is its temp dir.
      for (const m of stderr.matchAll(/pid (\d+)/g)) expect(() => process.kill(Number(m[1]), 0), `pid ${m[1]} still alive`).toThrow();
      expect([...drillDirs()].filter((d) => !before.has(d))).toEqual([]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
