/**
 * TallyCounter folds its tallies into prom-client's state when read: what /metrics shows must
 * be exactly what prom-client's Counter shows for the same increments, at every read, through
 * a reset, and get() sees the tallies too.
 */
import { describe, expect, test } from "bun:test";
import client from "prom-client";
import { TallyCounter } from "../../src/obs/tally-counter.ts";
import { Metrics } from "../../src/obs/metrics.ts";

function pair() {
  const a = new client.Registry();
  const b = new client.Registry();
  const plain = new client.Counter({ name: "c_total", help: "c", labelNames: ["outcome"], registers: [a] });
  const tally = new TallyCounter({ name: "c_total", help: "c", labelNames: ["outcome"] as const, registers: [b] });
  return { a, b, plain, tally };
}

describe("TallyCounter", () => {
  test("the exposition equals prom-client's Counter for the same increments, read after read", async () => {
    const { a, b, plain, tally } = pair();
    const incs: [string, number][] = [
      ["success", 1],
      ["transient", 1],
      ["success", 1],
      ["success", 5],
    ];
    for (const [v, n] of incs) {
      plain.inc({ outcome: v }, n);
      tally.tally(v, n);
    }
    expect(await b.metrics()).toBe(await a.metrics());
    expect(await b.metrics()).toContain('c_total{outcome="success"} 7');
    // Read again with nothing new: the same (the fold does not count twice).
    expect(await b.metrics()).toBe(await a.metrics());
    plain.inc({ outcome: "permanent" });
    tally.tally("permanent");
    expect(await b.metrics()).toBe(await a.metrics());
  });

  test("get() folds the tallies; reset() forgets counted and tallied alike", async () => {
    const { tally, b } = pair();
    tally.tally("success", 3);
    expect((await tally.get()).values).toEqual([{ value: 3, labels: { outcome: "success" } }]);
    tally.tally("success");
    tally.reset();
    expect((await tally.get()).values).toEqual([]);
    tally.tally("throttled");
    expect(await b.metrics()).toContain('c_total{outcome="throttled"} 1');
  });

  test("the process's deliveries, retries and shard counters are tallied and scraped", async () => {
    const m = new Metrics();
    m.deliveries.tally("success");
    m.retries.tally("throttled", 2);
    m.shardDispatched.tally("0", 40);
    const text = await m.registry.metrics();
    expect(text).toContain('scheduler_deliveries_total{outcome="success"} 1');
    expect(text).toContain('scheduler_retries_total{class="throttled"} 2');
    expect(text).toContain('scheduler_shard_dispatched_total{shard="0"} 40');
  });
});
