// The variables of the section "Flow control" (rates, quotas and shares): see ../variables.ts.
import * as v from "valibot";
import { parseTenantQuotas } from "../../dispatcher/tenant-quotas.ts";
import { duration, int, parsedBy } from "../schemas.ts";
import type { Variable } from "../variable.ts";

/** A tenant's running quota, as a share of WORKER_CONCURRENCY, when some token is limited to one tenant. */
export const TENANT_SHARE_WITH_TENANTS = 0.5;

export const FLOW_CONTROL = {
  SCHEDULER_PRIORITY_WEIGHTS: {
    schema: v.pipe(
      v.string(),
      v.regex(/^\s*\d{1,4}\s*,\s*\d{1,4}\s*,\s*\d{1,4}\s*$/, "must be three whole numbers high,normal,low like 8,3,1"),
      v.transform((s) => s.split(",").map((w) => Number(w.trim()))),
      v.check((ws) => ws.every((w) => w >= 1), "must be three whole numbers ≥ 1"),
      v.transform(([high, normal, low]) => ({ high: high!, normal: normal!, low: low! })),
    ),
    default: "8,3,1",
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "shares of the high, normal and low classes in each dispatch batch",
  },
  SCHEDULER_AGING: {
    schema: duration(1000),
    default: "1m",
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "a waiting job rises one priority class per this much lateness",
  },
  SCHEDULER_TENANT_MAX_RUNNING: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    shownDefault: "see `SCHEDULER_TENANT_SHARE`",
    doc: "every tenant's quota of jobs queued or running at once",
  },
  SCHEDULER_TENANT_SHARE: {
    schema: v.pipe(
      v.string(),
      v.regex(/^(0(\.\d{1,4})?|1(\.0{1,4})?)$/, "must be a fraction of WORKER_CONCURRENCY above 0 and at most 1, like 0.5"),
      v.transform(Number),
      v.minValue(0.0001, "must be above 0"),
    ),
    section: "Flow control",
    readBy: ["dispatcher"],
    shownDefault: `\`${TENANT_SHARE_WITH_TENANTS}\` with tenant tokens`,
    doc: "a tenant's quota as a share of `WORKER_CONCURRENCY`, if no `SCHEDULER_TENANT_MAX_RUNNING`",
    more: " (rounded up). Applies by default when `SCHEDULER_TOKENS` has a token limited to one tenant; with only `*` tokens or none, only when set",
  },
  SCHEDULER_TENANT_RATE: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "every tenant's dispatches per second",
  },
  SCHEDULER_TENANT_QUOTAS: {
    schema: parsedBy(parseTenantQuotas),
    quiet: true,
    section: "Flow control",
    readBy: ["api", "dispatcher"],
    doc: "per-tenant overrides, `acme:running=50,rate=100;beta:rate=10,schedules=5000`",
  },
  SCHEDULER_DISPATCH_RATE: {
    schema: int(1, 10_000_000),
    section: "Flow control",
    readBy: ["dispatcher"],
    doc: "dispatches per second across all tenants",
  },
} as const satisfies Record<string, Variable>;
