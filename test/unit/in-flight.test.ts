// The worker's claimed jobs (src/worker/in-flight.ts): one phase each, counts that follow every
// change, one exit that gives the host's room back, and a replaced or released job that can
// no longer move the counts.
import { describe, expect, test } from "bun:test";
import { InFlightJobs } from "../../src/worker/in-flight.ts";
import type { ClaimedJob } from "../../src/store/types.ts";
import { memoryLogger } from "../helpers/log.ts";

const job = (id: string, priority = 0) => ({ id, priority, lease_generation: 1 }) as unknown as ClaimedJob;

function jobs(reservedMin?: number) {
  const forgotten: string[] = [];
  const mem = memoryLogger();
  return { forgotten, mem, js: new InFlightJobs({ forget: (id) => forgotten.push(id), reservedMin, log: mem.log }) };
}

describe("InFlightJobs", () => {
  test("counts per phase follow add, enter and release; release gives the host's room back once", () => {
    const { js, forgotten, mem } = jobs();
    const a = js.add(job("a"), 0);
    const b = js.add(job("b"), 0);
    expect(js.counts.claimed).toBe(2);
    js.enter(a, "ready");
    js.enter(a, "starting");
    js.enter(b, "held");
    expect({ ...js.counts }).toMatchObject({ claimed: 0, ready: 0, starting: 1, held: 1 });
    js.enter(a, "armed");
    js.enter(a, "calling");
    js.enter(a, "finishing");
    js.release(a, "recorded");
    js.release(a, "recorded");
    js.release(b, "given back");
    expect(Object.values(js.counts).every((n) => n === 0)).toBe(true);
    expect(js.size).toBe(0);
    expect(forgotten).toEqual(["a", "b"]);
    // An exit without a recorded call says so, with the phase it left from.
    expect(mem.find("released without a recorded call").map((l) => [l.job_id, l.phase, l.why])).toEqual([["b", "held", "given back"]]);
  });

  test("a job claimed again replaces the old entry, which no longer counts nor releases the new one", () => {
    const { js, forgotten } = jobs();
    const old = js.add(job("a"), 0);
    js.enter(old, "calling");
    const fresh = js.add(job("a"), 1);
    expect(js.holds(old)).toBe(false);
    expect({ ...js.counts }).toMatchObject({ calling: 0, claimed: 1 });
    js.enter(old, "finishing");
    js.release(old, "recorded");
    expect(js.get("a")).toBe(fresh);
    expect(js.counts.finishing).toBe(0);
    expect(forgotten).toEqual([]);
  });

  test("jobs below the reserved class hold a slot unless held for their host", () => {
    const { js } = jobs(5);
    const low = js.add(job("low", 0), 0);
    js.add(job("high", 9), 0);
    expect(js.busyBelow()).toBe(1);
    js.enter(low, "held");
    expect(js.busyBelow()).toBe(0);
    js.enter(low, "starting");
    expect(js.busyBelow()).toBe(1);
    js.release(low, "stale");
    expect(js.busyBelow()).toBe(0);
    expect(jobs().js.busyBelow()).toBe(0);
  });
});
