// The dashboard's health verdict (src/api/ui/health.js, plain JS for the browser) must say
// what `scheduler status` says (src/obs/status-screen.ts) for the same stats.
import { describe, expect, test } from "bun:test";
import { duration, verdict } from "../../src/obs/status-screen.ts";

// A variable path: the module's real exports, not the text the server embeds.
const browserPath = new URL("../../src/api/ui/health.js", import.meta.url).href;
const browser = (await import(browserPath)) as { verdict: typeof verdict; duration: typeof duration };

const at = "2026-11-29T12:00:00.000Z";
const base = {
  at,
  tenant: null,
  jobs: { scheduled: 3, queued: 0, running: 1, succeeded: 10, dead: 0, cancelled: 0, expired: 0 },
  due_backlog: 0,
  overdue: 0,
  overdue_after_seconds: 60,
  oldest_due_age_seconds: 0,
  queue_depth: 0,
  dlq: { jobs: 0, oldest_age_seconds: 0 },
  recent: { window_seconds: 300, by_outcome: {}, start_lag: { p50: null, p99: null, max: null, count: 0 } },
  tenants_due_backlog: [],
  cluster: { region: "ams", home_region: "ams", role: "home", generation: 1, epoch: 3, leader: "a", lease_until: "2026-11-29T12:00:05.000Z" },
};
type Stats = Parameters<typeof verdict>[0];

const cases: [string, Stats][] = [
  ["healthy", base],
  ["no authority", { ...base, cluster: null }],
  ["no leader", { ...base, cluster: { ...base.cluster, leader: null } }],
  ["lease expired", { ...base, cluster: { ...base.cluster, lease_until: "2026-11-29T11:59:00.000Z" } }],
  ["standby without leader is fine", { ...base, cluster: { ...base.cluster, role: "standby", leader: null } }],
  ["overdue", { ...base, overdue: 1234 }],
  ["queue stuck", { ...base, queue_depth: 5, jobs: { ...base.jobs, running: 0 }, oldest_due_age_seconds: 30 }],
  ["dead jobs", { ...base, dlq: { jobs: 2, oldest_age_seconds: 4000 } }],
  [
    "everything",
    {
      ...base,
      cluster: { ...base.cluster, leader: null },
      overdue: 7,
      queue_depth: 1,
      jobs: { ...base.jobs, running: 0 },
      oldest_due_age_seconds: 11,
      dlq: { jobs: 1, oldest_age_seconds: 0.5 },
    },
  ],
];

describe("dashboard health verdict", () => {
  for (const [name, s] of cases) {
    test(`same verdict as scheduler status: ${name}`, () => {
      expect(browser.verdict(s)).toEqual(verdict(s));
    });
  }

  test("the cases cover healthy and every warning", () => {
    expect(verdict(base)).toEqual([]);
    expect(verdict(cases.at(-1)![1])).toHaveLength(4);
  });

  test("same durations", () => {
    for (const s of [null, 0, 0.0004, 0.25, 1, 59.94, 119.99, 120, 3599, 7199, 7200, 90061]) expect(browser.duration(s)).toBe(duration(s));
  });
});
