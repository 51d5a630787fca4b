/**
 * Peak resident memory (VmHWM) of the embedded default's first start: `bun src/main.ts` on a
 * fresh, empty data directory (what a newcomer's `npm start` does), until /readyz answers, then
 * a second start on the same directory. Linux only (/proc).
 *
 *   bun bench/first-start.ts [--runs N]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { procMemoryBytes, SchedulerProcess } from "./lib/scheduler-process.ts";

const { values } = parseArgs({ options: { runs: { type: "string" } } });
const runs = Number(values.runs ?? 1);

async function once(dataDir: string): Promise<{ peakMiB: number; restMiB: number; seconds: number }> {
  const started = Date.now();
  const p = await SchedulerProcess.start({ dataDir, concurrency: 32, logLevel: "warn", logFile: join(dataDir, "..", "log.txt") });
  try {
    await p.waitReady(300_000);
    const seconds = (Date.now() - started) / 1000;
    await Bun.sleep(1000);
    const peak = procMemoryBytes(p.proc.pid, "VmHWM") ?? NaN;
    const rest = procMemoryBytes(p.proc.pid, "VmRSS") ?? NaN;
    return { peakMiB: peak / 2 ** 20, restMiB: rest / 2 ** 20, seconds };
  } finally {
    await p.stop().catch(() => p.kill());
  }
}

for (let i = 0; i < runs; i++) {
  const root = mkdtempSync(join(tmpdir(), "scheduler-first-start-"));
  const dataDir = join(root, "data");
  try {
    const first = await once(dataDir);
    const second = await once(dataDir);
    const f = (r: typeof first) => `peak ${r.peakMiB.toFixed(0)} MiB, at rest ${r.restMiB.toFixed(0)} MiB, ready in ${r.seconds.toFixed(1)} s`;
    console.log(`first start: ${f(first)}\nsecond start: ${f(second)}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
