/**
 * The chaos suite's long form: rounds of load and random faults for --minutes, a table per
 * round and a total. Exit 0 only if every invariant held in every round.
 *
 *   npm run chaos -- --minutes=30 [--seed=N] [--round-seconds=120] [--rate=4]
 *
 * Round i's seed is derived from the first (printed with each round); replay one round alone
 * with --seed=<that round's seed> --minutes=0 (one round).
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { chooseSeed, Prng } from "./prng.ts";
import { formatRound, formatTotal, violated, type RoundResult } from "./report.ts";
import { runRound } from "./round.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { minutes: { type: "string" }, seed: { type: "string" }, "round-seconds": { type: "string" }, rate: { type: "string" } },
});
const num = (s: string | undefined, d: number, what: string) => {
  if (s === undefined) return d;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) {
    process.stderr.write(`chaos: ${what} must be a number ≥ 0 (got ${JSON.stringify(s)})\n`);
    process.exit(2);
  }
  return n;
};
const minutes = num(values.minutes, 30, "--minutes");
const roundMs = num(values["round-seconds"], 120, "--round-seconds") * 1000;
const rate = num(values.rate, 4, "--rate");
let seed: number;
try {
  seed = chooseSeed(values.seed ?? process.env.CHAOS_SEED);
} catch (err) {
  process.stderr.write(`chaos: ${(err as Error).message}\n`);
  process.exit(2);
}

const started = Date.now();
const deadline = started + minutes * 60_000;
const seeds = new Prng(seed);
const rounds: RoundResult[] = [];
let stop = false;
process.on("SIGINT", () => {
  if (stop) process.exit(130);
  stop = true;
  process.stderr.write("chaos: stopping after this round (Ctrl-C again to quit now)\n");
});
process.stderr.write(`chaos: seed ${seed}, ${minutes} min, rounds of ${roundMs / 1000} s load, ${rate} one-off jobs/s\n`);
for (let i = 1; !stop; i++) {
  const roundSeed = i === 1 ? seed : Math.floor(seeds.next() * 0xffffffff);
  const r = await runRound({
    round: i,
    seed: roundSeed,
    loadMs: roundMs,
    faults: { mode: "random", gapMinMs: 2000, gapMaxMs: 6000 },
    perSecond: rate,
    settleMs: 60_000,
    say: (line) => process.stderr.write(`${line}\n`),
    keepLogsIn: join(import.meta.dir, "..", "..", "test-artifacts"),
  });
  rounds.push(r);
  process.stdout.write(`${formatRound(r)}\n\n`);
  if (Date.now() + roundMs > deadline) break;
}
process.stdout.write(`${formatTotal(rounds, Date.now() - started)}\n`);
process.exit(rounds.some(violated) ? 1 : 0);
