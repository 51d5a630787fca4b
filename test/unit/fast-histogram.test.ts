/**
 * FastHistogram writes into prom-client's own state: what /metrics shows must be exactly what
 * prom-client's Histogram shows for the same values, through a reset, and bad values are
 * refused as prom-client refuses them.
 */
import { describe, expect, test } from "bun:test";
import client from "prom-client";
import { FastHistogram } from "../../src/obs/fast-histogram.ts";
import { Metrics } from "../../src/obs/metrics.ts";

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

function pair() {
  const a = new client.Registry();
  const b = new client.Registry();
  const plain = new client.Histogram({ name: "h_seconds", help: "h", buckets: BUCKETS, registers: [a] });
  const fast = new FastHistogram({ name: "h_seconds", help: "h", buckets: BUCKETS, registers: [b] });
  return { a, b, plain, fast };
}

describe("FastHistogram", () => {
  test("the exposition equals prom-client's Histogram for the same values (every bucket, both edges, above the last)", async () => {
    const { a, b, plain, fast } = pair();
    // On a bound (counts in that bucket), between, below the first, above the last (+Inf only), zero, negative.
    const values = [0, -1, 0.001, 0.0010001, 0.005, 0.01, 0.5, 1, 9.99, 10, 10.0001, 1e9, 0.1, 0.1, 0.1];
    for (const v of values) {
      plain.observe(v);
      fast.observe(v);
    }
    expect(await b.metrics()).toBe(await a.metrics());
    expect(await b.metrics()).toContain('h_seconds_bucket{le="0.1"} 9');
    expect(await b.metrics()).toContain(`h_seconds_count ${values.length}`);
  });

  test("after reset() it counts from zero again, as prom-client does", async () => {
    const { a, b, plain, fast } = pair();
    for (const h of [plain, fast]) {
      h.observe(3);
      h.reset();
      h.observe(0.05);
      h.observe(0.05);
    }
    expect(await b.metrics()).toBe(await a.metrics());
    expect(await b.metrics()).toContain("h_seconds_count 2");
  });

  test("a value that is not a finite number is refused as prom-client refuses it", () => {
    const { plain, fast } = pair();
    expect(() => plain.observe(Number.NaN)).toThrow(TypeError);
    expect(() => fast.observe(Number.NaN)).toThrow(TypeError);
    expect(() => fast.observe(Number.POSITIVE_INFINITY)).toThrow(TypeError);
  });

  test("the worker's calls in flight are read at scrape time", async () => {
    const m = new Metrics();
    let calling = 7;
    m.callsInFlight = () => calling;
    expect(await m.registry.metrics()).toContain("scheduler_worker_inflight 7");
    calling = 0;
    expect(await m.registry.metrics()).toContain("scheduler_worker_inflight 0");
  });
});
