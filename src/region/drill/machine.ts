import { cpus, platform, release, totalmem } from "node:os";
import type { MachineInfo } from "./report.ts";

export function machineInfo(): MachineInfo {
  const c = cpus();
  return {
    cpu_model: (c[0]?.model ?? "unknown").trim(),
    cores: c.length,
    memory_gb: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${platform()} ${release()}`,
    bun: Bun.version,
  };
}
