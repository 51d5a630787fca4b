/**
 * The chaos suite's short form (issue 14): one round of ~45 s of mixed load on a cluster of
 * real processes (region a: api, two dispatchers, two workers; region b: one process of
 * every part) on a PostgreSQL and a Redis of its own, with every fault kind injected once at
 * seeded instants; then every invariant is checked. The seed is printed; CHAOS_SEED=<n>
 * replays the same plan. The long form is `npm run chaos -- --minutes=30` (test/chaos/main.ts).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { chooseSeed } from "./prng.ts";
import { formatRound } from "./report.ts";
import { runRound } from "./round.ts";

test("chaos: every invariant holds under one fault of each kind", async () => {
  const seed = chooseSeed(process.env.CHAOS_SEED);
  const r = await runRound({
    round: 1,
    seed,
    loadMs: 45_000,
    faults: { mode: "each", each: 1 },
    perSecond: 3,
    settleMs: 25_000,
    say: (line) => process.stderr.write(`${line}\n`),
    keepLogsIn: join(import.meta.dir, "..", "..", "test-artifacts"),
  });
  const table = formatRound(r);
  process.stderr.write(`${table}\n`);
  expect(r.error, table).toBeNull();
  const violated = r.checks.filter((c) => c.violations.length > 0).map((c) => `${c.name}: ${c.violations.length} (${c.violations[0]})`);
  expect(violated, table).toEqual([]);
}, 180_000);
