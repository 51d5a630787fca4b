/**
 * A scrape must not walk the JS heap: prom-client's per-space heap gauges call
 * v8.getHeapSpaceStatistics(), which in Bun visits every live object on the event loop
 * (~16 ms with 300,000 of them), a stall of every call and claim at each scrape.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import v8 from "node:v8";
import { HEAP_SPACE_GAUGES, Metrics } from "../../src/obs/metrics.ts";

describe("a /metrics scrape", () => {
  const spies: { mockRestore(): void }[] = [];
  afterEach(() => {
    for (const s of spies.splice(0)) s.mockRestore();
  });

  test("never asks for the heap's per-space statistics, and keeps the heap's size and use", async () => {
    const perSpace = spyOn(v8, "getHeapSpaceStatistics");
    spies.push(perSpace);
    const m = new Metrics();
    perSpace.mockClear(); // prom-client reads the space names once when it sets the gauges up
    const text = await m.registry.metrics();
    expect(perSpace).not.toHaveBeenCalled();
    for (const name of HEAP_SPACE_GAUGES) expect(text).not.toContain(`scheduler_process_${name}`);
    expect(text).toMatch(/^scheduler_process_nodejs_heap_size_used_bytes \d+/m);
    expect(text).toMatch(/^scheduler_process_nodejs_heap_size_total_bytes \d+/m);
    expect(text).toMatch(/^scheduler_process_process_resident_memory_bytes \d+/m);
  });

  test("the spy sees prom-client's call when the gauges are registered (the test can fail)", async () => {
    const perSpace = spyOn(v8, "getHeapSpaceStatistics");
    spies.push(perSpace);
    const { default: client } = await import("prom-client");
    const registry = new client.Registry();
    client.collectDefaultMetrics({ register: registry });
    perSpace.mockClear();
    await registry.metrics();
    expect(perSpace).toHaveBeenCalled();
  });
});
