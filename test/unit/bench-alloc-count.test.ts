// bench/alloc-count.ts counts the heap cells one call makes, layer by layer, with the
// collector held off in its children. Run small here: its table names every layer without a
// database, each layer makes more cells than the one it wraps, and a count is a count (two
// runs give the same figures for the same code).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";

const bench = join(import.meta.dir, "..", "..", "bench", "alloc-count.ts");

function run(): { code: number; out: string } {
  const r = Bun.spawnSync([process.execPath, bench, "--calls", "200"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, TEST_DATABASE_URL: "", DATABASE_URL: "" },
  });
  return { code: r.exitCode, out: r.stdout.toString() };
}

/** The "all" row: total cells a call, by layer. */
function totals(out: string): Record<string, number> {
  const lines = out.split("\n");
  const header = lines
    .find((l) => l.startsWith("type "))!
    .trim()
    .split(/\s{2,}/);
  const all = lines
    .find((l) => l.startsWith("all "))!
    .trim()
    .split(/\s{2,}/);
  return Object.fromEntries(header.slice(1).map((layer, i) => [layer, Number(all[i + 1])]));
}

describe("bench:alloc", () => {
  test("counts every layer's cells a call, each more than the layer inside it, the same twice", () => {
    const first = run();
    expect(first.code).toBe(0);
    expect(first.out).toContain("no collection in between");
    expect(first.out).toContain("claimed rows and scheduler not counted: no DATABASE_URL");
    const t = totals(first.out);
    expect(Object.keys(t)).toEqual(["fetch", "deliver", "callAttempt"]);
    expect(t.fetch).toBeGreaterThan(0);
    expect(t.deliver).toBeGreaterThan(t.fetch);
    expect(t.callAttempt).toBeGreaterThan(t.deliver);
    // Engine cells (shapes, code) can differ by a fraction between runs; a call's own do not.
    const second = run();
    expect(second.code).toBe(0);
    const again = totals(second.out);
    for (const layer of Object.keys(t)) expect(Math.abs(again[layer] - t[layer])).toBeLessThan(1);
  }, 120_000);
});
