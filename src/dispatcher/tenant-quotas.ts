/**
 * SCHEDULER_TENANT_QUOTAS: per-tenant overrides of the default quotas, e.g.
 * "acme:running=50,rate=100;beta:rate=10,schedules=5000" (running: jobs queued or running at
 * once; rate: dispatches per second; schedules: schedules the tenant may have).
 */
import type { TenantQuota } from "./dispatch-planner.ts";

export function parseTenantQuotas(text: string): Record<string, TenantQuota> {
  const out: Record<string, TenantQuota> = {};
  for (const part of text
    .split(";")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const colon = part.indexOf(":");
    if (colon <= 0) throw new Error(`entry ${JSON.stringify(part)} must look like tenant:running=N,rate=N`);
    const tenant = part.slice(0, colon).trim();
    if (tenant in out) throw new Error(`tenant ${tenant} appears twice`);
    const q: TenantQuota = {};
    for (const kv of part
      .slice(colon + 1)
      .split(",")
      .map((s) => s.trim())) {
      const m = /^(running|rate|schedules)=(\d{1,9})$/.exec(kv);
      if (!m || Number(m[2]) < 1) throw new Error(`${JSON.stringify(kv)} in ${tenant}'s entry must be running=N, rate=N or schedules=N with N ≥ 1`);
      if (m[1] === "running") q.maxRunning = Number(m[2]);
      else if (m[1] === "rate") q.ratePerSec = Number(m[2]);
      else q.maxSchedules = Number(m[2]);
    }
    out[tenant] = q;
  }
  return out;
}
