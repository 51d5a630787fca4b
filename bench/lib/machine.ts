import { readFileSync } from "node:fs";
import os from "node:os";
import { JSC_RAM_SIZE } from "./scheduler-process.ts";

export interface Machine {
  cpu: string;
  cores: number;
  memory: string;
  os: string;
  bun: string;
  postgres: string;
  driver: string;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

export function cpuModel(): string {
  const m = /^model name\s*:\s*(.+)$/m.exec(read("/proc/cpuinfo") ?? "");
  return m?.[1].trim() ?? os.cpus()[0]?.model ?? "unknown";
}

export function osName(): string {
  const pretty = /^PRETTY_NAME="?([^"\n]+)"?$/m.exec(read("/etc/os-release") ?? "")?.[1];
  const kernel = `${os.type()} ${os.release()} ${os.arch()}`;
  return pretty ? `${pretty}, ${kernel}` : kernel;
}

export function describeMachine(postgres: string, driver: string): Machine {
  return {
    cpu: cpuModel(),
    cores: navigator.hardwareConcurrency || os.cpus().length,
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    os: osName(),
    // The scheduler's processes run with the GC's RAM size its launchers set (scheduler-process.ts).
    bun: `${Bun.version} (${Bun.revision.slice(0, 9)}); scheduler with BUN_JSC_forceRAMSize=${process.env.BUN_JSC_forceRAMSize ?? JSC_RAM_SIZE}`,
    postgres,
    driver,
  };
}

export function packageVersion(name: string): string {
  try {
    return JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), "utf8")).version;
  } catch {
    return "?";
  }
}

/** Busy and total CPU time of the whole machine (all cores), in seconds, from /proc/stat. */
export function machineCpuSeconds(): { busy: number; total: number } | undefined {
  const line = read("/proc/stat")
    ?.split("\n")
    .find((l) => l.startsWith("cpu "));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const idle = f[3] + (f[4] ?? 0);
  const total = f.slice(0, 8).reduce((a, b) => a + (b || 0), 0);
  return { busy: (total - idle) / 100, total: total / 100 };
}
