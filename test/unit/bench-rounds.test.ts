// bench:peers --rounds (README "peers"): the table's figure is the median over rounds, and
// its ratio the median of each round's ratio to that round's best peer, so a box that
// slows between rounds moves both systems' figures, not the ratio.
import { describe, expect, test } from "bun:test";
import { acrossRounds, median, roundOrder } from "../../bench/peers/rounds.ts";

const round = (o: Record<string, number | undefined>) => new Map(Object.entries(o));

describe("bench:peers rounds", () => {
  test("median: odd and even counts, missing and non-finite values left out", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([undefined, Number.NaN, 5])).toBe(5);
    expect(median([])).toBeUndefined();
  });

  test("each ratio is taken within its round: a box twice as slow in round 2 leaves the ratio", () => {
    const rounds = [round({ scheduler: 10_000, graphile: 20_000, bullmq: 9_000 }), round({ scheduler: 5_000, graphile: 10_000, bullmq: 4_000 })];
    const cells = acrossRounds(rounds, ["scheduler", "graphile", "bullmq"], ["graphile", "bullmq"], true);
    expect(cells.get("scheduler")).toEqual({ value: 7_500, ratio: 0.5 });
    expect(cells.get("graphile")).toEqual({ value: 15_000, ratio: 1 });
    expect(cells.get("bullmq")!.ratio).toBeCloseTo(0.425, 10);
  });

  test("lower is better: the best peer is the lowest; zero and missing figures are nobody's best", () => {
    const rounds = [round({ scheduler: 4, graphile: 2, bullmq: 0 }), round({ scheduler: 6, graphile: undefined, bullmq: 3 })];
    const cells = acrossRounds(rounds, ["scheduler", "graphile", "bullmq"], ["graphile", "bullmq"], false);
    expect(cells.get("scheduler")).toEqual({ value: 5, ratio: 2 });
    expect(cells.get("graphile")).toEqual({ value: 2, ratio: 1 });
  });

  test("no peer figure in any round: a value without a ratio", () => {
    const cells = acrossRounds([round({ scheduler: 7 })], ["scheduler"], [], true);
    expect(cells.get("scheduler")).toEqual({ value: 7, ratio: undefined });
  });

  test("round order rotates by one a round", () => {
    expect(roundOrder(["a", "b", "c"], 0)).toEqual(["a", "b", "c"]);
    expect(roundOrder(["a", "b", "c"], 1)).toEqual(["b", "c", "a"]);
    expect(roundOrder(["a", "b", "c"], 3)).toEqual(["a", "b", "c"]);
    expect(roundOrder([], 2)).toEqual([]);
  });
});
