// The variables of the section "Regions" (home region, standby, failover): see ../variables.ts.
import { bool, duration, regionName } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const REGIONS = {
  REGION: {
    schema: regionName,
    flag: "region",
    section: "Regions",
    readBy: "all",
    shownDefault: "`FLY_REGION`, else `local`",
    doc: "this process's region (`--region` overrides it)",
  },
  HOME_REGION: {
    schema: regionName,
    section: "Regions",
    readBy: "all",
    shownDefault: "`PRIMARY_REGION`, else `REGION`",
    doc: "seeds the region authority on the very first start",
    more: " (after that the database says where home is)",
  },
  SCHEDULER_AUTHORITY_TTL: {
    schema: duration(1000),
    default: "30s",
    section: "Regions",
    readBy: "all",
    doc: "the region authority lease, renewed by the home dispatch leader every third",
  },
  SCHEDULER_AUTO_FAILOVER: {
    schema: bool,
    default: "1",
    section: "Regions",
    readBy: ["dispatcher"],
    doc: "a standby takes the authority once its lease lapsed (+ `SCHEDULER_CLOCK_SKEW`)",
    more: "; `0`: moves are manual only",
  },
} as const satisfies Record<string, Variable>;
