import { describe, expect, test } from "bun:test";
import { join } from "node:path";

// Every bench with whole-number flags starts with wholeFlagsOrExit (bench/lib/args.ts): run
// for real, as a user would, before any server is needed.
const bench = join(import.meta.dir, "..", "..", "bench", "idle-cost.ts");
const run = (args: string[]) =>
  Bun.spawnSync([process.execPath, bench, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, TEST_DATABASE_URL: "", DATABASE_URL: "" } });

describe("a bench's flags", () => {
  test("--help prints the usage and exits 0", () => {
    const r = run(["--help"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString()).toContain("usage: bun bench/idle-cost.ts [--seconds N] [--settle N]");
  });

  test("a bad number: one line naming the flag, the usage, exit 2", () => {
    const r = run(["--seconds", "x"]);
    expect(r.exitCode).toBe(2);
    const err = r.stderr.toString().split("\n");
    expect(err[0]).toBe('idle-cost: --seconds must be a whole number from 1 to 10000000 (got "x")');
    expect(err[1]).toContain("usage: bun bench/idle-cost.ts");
  });
});
