/** SlotSizing: how far ahead of its call slots a worker arms and prefetches, from what it measured. */
import { describe, expect, test } from "bun:test";
import { SlotSizing } from "../../src/worker/slot-sizing.ts";

describe("SlotSizing", () => {
  test("nothing is armed ahead before a call has been timed, nor with reserved slots, nor with slow calls", () => {
    const s = new SlotSizing({ concurrency: 32, prefetch: 1024, reservedSlots: false });
    expect(s.armAhead()).toBe(0);
    s.callEnded(10);
    expect(s.armAhead()).toBeGreaterThan(0);
    const reserved = new SlotSizing({ concurrency: 32, prefetch: 1024, reservedSlots: true });
    reserved.callEnded(10);
    expect(reserved.armAhead()).toBe(0);
    const slow = new SlotSizing({ concurrency: 32, prefetch: 1024, reservedSlots: false });
    slow.callEnded(500);
    expect(slow.armAhead()).toBe(0);
  });

  test("armed ahead: what the slots call during three checks (Little's law, with a margin), at least one a slot, at most 48 a slot", () => {
    const s = new SlotSizing({ concurrency: 32, prefetch: 1024, reservedSlots: false });
    s.callEnded(10);
    // No check timed yet: one a slot.
    expect(s.armAhead()).toBe(32);
    s.checked(50);
    // 3 × 32 slots × 50 ms / 10 ms a call.
    expect(s.armAhead()).toBe(480);
    s.checked(10_000);
    expect(s.armAhead()).toBe(48 * 32);
  });

  test("the prefetch follows what is armed ahead before the call rate is known, within its ceiling", () => {
    // A fresh worker knows its calls' and checks' times after one of each, its call rate only
    // after a 200 ms window: a burst must not run those first windows on a prefetch of 32.
    const s = new SlotSizing({ concurrency: 32, prefetch: 512, reservedSlots: false });
    s.callEnded(10);
    s.checked(20);
    // 3 × 32 slots × 20 ms / 10 ms a call.
    expect(s.armAhead()).toBe(192);
    expect(s.prefetchTarget()).toBe(192);
    s.checked(10_000);
    expect(s.prefetchTarget()).toBe(512);
  });

  test("the prefetch is at least the concurrency and at most its ceiling", () => {
    expect(new SlotSizing({ concurrency: 32, prefetch: 1024, reservedSlots: false }).prefetchTarget()).toBe(32);
    expect(new SlotSizing({ concurrency: 32, prefetch: 10, reservedSlots: false }).prefetchTarget()).toBe(10);
    expect(new SlotSizing({ concurrency: 32, reservedSlots: false }).prefetchTarget()).toBe(0);
  });
});
