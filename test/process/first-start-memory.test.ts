// The embedded default's very first start (a newcomer's `npm start` on an empty ./data) unpacks
// a data directory made by initdb at build time instead of running initdb, which peaked at
// about 1.1 GB (a later start: ~300 MB). The bound is generous: what it guards is initdb
// coming back, not a few megabytes.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openPglite } from "../../src/store/pglite-driver.ts";
import { needsInit, seedDataDir } from "../../src/store/pglite-seed.ts";
import seed from "../../src/store/pglite-seed/seed.json";
import { api } from "../helpers/scheduler.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";

const ROOT = join(import.meta.dir, "..", "..");
const PEAK_BOUND_MIB = 600;

function peakMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error("no VmHWM in /proc/PID/status");
  return Number(m[1]) / 1024;
}

describe("first start of the embedded default", () => {
  const root = mkdtempSync(join(tmpdir(), "sched-first-start-"));
  const procs: Proc[] = [];
  afterAll(async () => {
    for (const p of procs) kill(p);
    await Promise.all(procs.map((p) => p.exited));
    rmSync(root, { recursive: true, force: true });
  });

  test("the seed was made by the PGlite installed (after an upgrade: bun scripts/pglite-seed.ts)", () => {
    const installed = JSON.parse(readFileSync(join(ROOT, "node_modules/@electric-sql/pglite/package.json"), "utf8")).version;
    expect(seed.pglite).toBe(installed);
  });

  test(`a fresh data directory: ready, working, and the process peaks under ${PEAK_BOUND_MIB} MiB`, async () => {
    const dir = join(root, "fresh");
    const p = await spawnScheduler([], { SCHEDULER_DATA_DIR: dir, LOG_LEVEL: "info" }, { waitReady: false });
    procs.push(p);
    await p.waitForLog((l) => l.msg === "scheduler started", 180_000);
    const created = await api(p.url, "POST", "/v1/jobs", { target: { url: "https://example.com/hook" }, delay: "1h" });
    expect(created.status).toBe(201);
    const peak = peakMiB(p.proc.pid);
    expect(p.logs().some((l) => /could not be resumed/.test(String(l.msg)))).toBe(false);
    expect(peak).toBeLessThan(PEAK_BOUND_MIB);
    kill(p, "SIGTERM");
    expect(await p.exited).toBe(0);

    // The same directory again: resumed, the job still there.
    const again = await spawnScheduler([], { SCHEDULER_DATA_DIR: dir }, { waitReady: false });
    procs.push(again);
    await again.waitForLog((l) => l.msg === "scheduler started", 180_000);
    expect((await api(again.url, "GET", `/v1/jobs/${created.body.id}`)).body.status).toBe("scheduled");
  }, 400_000);

  test("a directory left half-unpacked (no PG_VERSION) is unpacked again and opens", async () => {
    const dir = join(root, "half");
    await seedDataDir(dir);
    unlinkSync(join(dir, "PG_VERSION"));
    rmSync(join(dir, "global"), { recursive: true });
    expect(needsInit(dir)).toBe(true);
    const db = await openPglite({
      dataDir: dir,
      onSeedFailed: (err) => {
        throw err;
      },
    });
    try {
      expect((await db.query<{ n: number }>("SELECT 1 AS n"))[0].n).toBe(1);
      expect(existsSync(join(dir, "global", "pg_control"))).toBe(true);
    } finally {
      await db.close();
    }
  }, 120_000);
});
