import { describe, expect, test } from "bun:test";
import { Deadlines } from "../../src/time/deadlines.ts";
import { JobAbort } from "../../src/worker/job-abort.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * Waits until `done()` (polling every 5 ms, at most 2 s): what must be released is waited for,
 * not a fixed sleep. Under a full suite's load a 10 ms timer fired over 70 ms late, and a fixed
 * 80 ms sleep failed a release that was only slow.
 */
async function until(done: () => boolean): Promise<void> {
  const end = performance.now() + 2000;
  while (!done() && performance.now() < end) await sleep(5);
}
const clock = () => performance.now();
/** Released items are callbacks: each runs when its instant comes (as deliver's call limits). */
const runAll = (fs: (() => void)[]) => {
  for (const f of fs) f();
};

describe("Deadlines", () => {
  test("an item is released at its instant, not before, and once", async () => {
    const d = new Deadlines<string, () => void>(runAll, clock, true);
    const fired: number[] = [];
    const t0 = performance.now();
    d.hold("a", t0 + 60, () => fired.push(performance.now() - t0));
    await sleep(30);
    expect(fired).toEqual([]);
    await until(() => fired.length > 0);
    await sleep(20);
    expect(fired.length).toBe(1);
    expect(fired[0]).toBeGreaterThanOrEqual(59);
    expect(d.size).toBe(0);
  });

  test("a removed item is never released; the others are, earliest first, whatever order they came in", async () => {
    const d = new Deadlines<string, () => void>(runAll, clock, true);
    const fired: string[] = [];
    const t0 = performance.now();
    d.hold("a", t0 + 40, () => fired.push("a"));
    d.hold("b", t0 + 80, () => fired.push("b"));
    d.hold("c", t0 + 20, () => fired.push("c")); // earlier than the armed one: the timer is moved up
    d.hold("d", t0 + 40, () => fired.push("d"));
    expect(d.remove("a")).toBeDefined();
    expect(d.remove("a")).toBeUndefined(); // twice is harmless
    expect(d.size).toBe(3);
    await until(() => fired.length >= 3);
    expect(fired).toEqual(["c", "d", "b"]);
    expect(d.size).toBe(0);
  });

  test("items held at one instant come out together, in instant order", async () => {
    const released: string[][] = [];
    const d = new Deadlines<string, string>((items) => released.push(items), clock, true);
    const t0 = performance.now();
    d.hold("y", t0 + 21, "y");
    d.hold("x", t0 + 20, "x");
    await until(() => released.flat().length >= 2);
    expect(released.flat()).toEqual(["x", "y"]);
  });

  test("a long hold ahead of many short ones: the removed ones are not kept until it ends", () => {
    const d = new Deadlines<number, () => void>(runAll, clock, true);
    const t0 = performance.now();
    d.hold(-1, t0 + 60_000, () => {});
    for (let i = 0; i < 10_000; i++) {
      d.hold(i, t0 + 60_000, () => {});
      d.remove(i);
    }
    expect(d.size).toBe(1);
    d.remove(-1);
    expect(d.size).toBe(0);
  });

  test("an item held from inside a release is kept and released in turn", async () => {
    const d = new Deadlines<string, () => void>(runAll, clock, true);
    const fired: string[] = [];
    d.hold("first", performance.now() + 10, () => {
      fired.push("first");
      d.hold("second", performance.now() + 10, () => fired.push("second"));
    });
    await until(() => fired.length >= 2);
    expect(fired).toEqual(["first", "second"]);
  });

  test("a release that removes the last other item and holds a new one under the same key: the new one is still released", async () => {
    const d = new Deadlines<string, () => void>(runAll, clock, true);
    const fired: string[] = [];
    const t0 = performance.now();
    d.hold("first", t0 + 10, () => {
      fired.push("first");
      d.remove("other"); // nothing else is held now
      d.hold("other", performance.now() + 10, () => fired.push("new"));
    });
    d.hold("other", t0 + 500, () => fired.push("other"));
    await until(() => fired.length >= 2);
    expect(fired).toEqual(["first", "new"]);
    expect(d.size).toBe(0);
  });

  test("drain hands back what is held and nothing is released after it", async () => {
    const d = new Deadlines<string, () => void>(runAll, clock, true);
    const fired: string[] = [];
    d.hold("a", performance.now() + 20, () => fired.push("a"));
    expect(d.drain().length).toBe(1);
    await sleep(50);
    expect(fired).toEqual([]);
  });
});

describe("JobAbort", () => {
  test("aborting the job aborts the call running under it, with the job's reason", () => {
    const job = new JobAbort();
    const call = new AbortController();
    job.call = call;
    job.abort("stop");
    expect(job.signal.reason).toBe("stop");
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe("stop");
  });

  test("without a reason the call gets the job's own AbortError; with no call running nothing else happens", () => {
    const job = new JobAbort();
    const call = new AbortController();
    job.call = call;
    job.abort();
    expect((call.signal.reason as DOMException).name).toBe("AbortError");
    expect(call.signal.reason).toBe(job.signal.reason);
    const idle = new JobAbort();
    idle.abort("cancel");
    expect(idle.signal.aborted).toBe(true);
  });
});
