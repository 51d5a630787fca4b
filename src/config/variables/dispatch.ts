// The variables of the section "Dispatch" (claims and the dispatcher loop): see ../variables.ts.
import * as v from "valibot";
import { duration, int } from "../schemas.ts";
import type { Variable } from "../variable.ts";

const DISPATCH_AND_WORK = ["dispatcher", "worker"] as const;

export const DISPATCH = {
  SCHEDULER_DISPATCH_BATCH: {
    schema: int(1, 10_000),
    default: "500",
    section: "Dispatch",
    readBy: ["dispatcher"],
    doc: "jobs per dispatcher claim",
  },
  SCHEDULER_LEASE_TTL: {
    schema: duration(1000),
    default: "30s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "a worker's claim on a job without renewal (renewed every third)",
  },
  SCHEDULER_LEADER_TTL: {
    schema: duration(1000),
    default: "10s",
    section: "Dispatch",
    readBy: "all",
    doc: "the dispatch coordinator lease and each shard lease (renewed every third)",
    more: "; also how long a scheduler transaction may sit idle before the server ends it (see [Sharded dispatch](#sharded-dispatch))",
  },
  SCHEDULER_CLOCK_SKEW: {
    schema: duration(0),
    default: "2s",
    section: "Dispatch",
    readBy: "all",
    doc: "extra wait before another node's expired lease is taken",
  },
  SCHEDULER_POLL_INTERVAL: {
    schema: duration(10),
    default: "1s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "fallback scan interval: a lost notification delays work at most this much",
  },
  SCHEDULER_SHARDS: {
    schema: int(1, 1024),
    default: "16",
    section: "Dispatch",
    readBy: "all",
    doc: "dispatch shards (1–1024); change it only with every dispatcher stopped",
    more: "; shared by the home region's dispatchers (see [Sharded dispatch](#sharded-dispatch))",
  },
  SCHEDULER_CATCHUP_RATE: {
    schema: int(1, 1_000_000),
    default: "50",
    section: "Dispatch",
    readBy: ["api", "dispatcher"],
    doc: "catch-up occurrences released per second at most, per tenant",
    more: "; also the cap of a bulk replay's `rate_per_sec`",
  },
  SCHEDULER_PRESTAGE: {
    schema: v.pipe(duration(0), v.maxValue(60_000, "must be at most 60s: claimed jobs wait in workers' memory until due")),
    default: "0s",
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "claim due jobs this early (≤ `60s`); workers hold them until due",
    more: " (see [Flow control](#flow-control-priority-fairness-quotas))",
  },
  SCHEDULER_OCCURRENCE_LEAD: {
    schema: v.pipe(duration(0), v.maxValue(60_000, "must be at most 60s: a change to a schedule takes back the occurrence made ahead")),
    default: "0s",
    section: "Dispatch",
    readBy: ["dispatcher"],
    doc: "make a schedule's next occurrence this early (≤ `60s`), due at its nominal time",
    more: " (see [Occurrences made ahead](#occurrences-made-ahead))",
  },
  SCHEDULER_RESERVED_SLOTS: {
    schema: v.pipe(
      v.string(),
      v.regex(/^\s*\d{1,5}\s*:\s*-?\d{1,9}\s*$/, "must be SLOTS:MIN_PRIORITY, like 10:1 (10 worker slots only for jobs of priority 1 or more)"),
      v.transform((s) => {
        const [slots, min] = s.split(":").map((x) => Number(x.trim()));
        return { slots: slots!, minPriority: min! };
      }),
    ),
    section: "Dispatch",
    readBy: DISPATCH_AND_WORK,
    doc: "`SLOTS:MIN_PRIORITY`, e.g. `10:5`: worker slots only jobs of that priority or more use",
  },
} as const satisfies Record<string, Variable>;
