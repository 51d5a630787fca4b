// The embedded default across processes: PGlite's data directory is locked so a second
// process cannot corrupt it, and the lock dies with its holder, even by SIGKILL.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/scheduler.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";

describe("embedded PGlite data directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "sched-embedded-"));
  const procs: Proc[] = [];
  afterAll(async () => {
    for (const p of procs) kill(p);
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  });

  test("a second process on the same directory is refused with one clear line; the first keeps its data", async () => {
    const first = await spawnScheduler([], { SCHEDULER_DATA_DIR: dir });
    procs.push(first);
    const created = await api(first.url, "POST", "/v1/jobs", { target: { url: "https://example.com/hook" }, delay: "1h" });
    expect(created.status).toBe(201);
    const second = await spawnScheduler([], { SCHEDULER_DATA_DIR: dir }, { waitReady: false });
    procs.push(second);
    expect(await second.exited).toBe(2);
    const lines = second.stderr().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("in use by another scheduler process");
    expect((await api(first.url, "GET", `/v1/jobs/${created.body.id}`)).status).toBe(200);

    // SIGKILL the holder: the kernel drops the lock, a new process opens the same data.
    kill(first, "SIGKILL");
    await first.exited;
    const third = await spawnScheduler([], { SCHEDULER_DATA_DIR: dir });
    procs.push(third);
    const again = await api(third.url, "GET", `/v1/jobs/${created.body.id}`);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe("scheduled");
  });
});
