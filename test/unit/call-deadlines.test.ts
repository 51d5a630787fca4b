import { describe, expect, test } from "bun:test";
import { CallDeadlines } from "../../src/worker/call-deadlines.ts";
import { JobAbort } from "../../src/worker/job-abort.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("CallDeadlines", () => {
  test("a limit fires at its time, not before, and once", async () => {
    const d = new CallDeadlines();
    const fired: number[] = [];
    const t0 = performance.now();
    d.add(60, () => fired.push(performance.now() - t0));
    await sleep(30);
    expect(fired).toEqual([]);
    await sleep(100);
    expect(fired.length).toBe(1);
    expect(fired[0]).toBeGreaterThanOrEqual(59);
    expect(d.size()).toBe(0);
  });

  test("an ended call's limit never fires; the others still do, in deadline order across limits", async () => {
    const d = new CallDeadlines();
    const fired: string[] = [];
    const a = d.add(40, () => fired.push("a"));
    d.add(80, () => fired.push("b"));
    d.add(20, () => fired.push("c")); // shorter than the armed one: the timer is moved up
    d.add(40, () => fired.push("d"));
    d.end(a);
    d.end(a); // twice is harmless
    expect(d.size()).toBe(3);
    await sleep(150);
    expect(fired).toEqual(["c", "d", "b"]);
    expect(d.size()).toBe(0);
  });

  test("a long call ahead of many short ones: ended entries are compacted, not kept until it ends", () => {
    const d = new CallDeadlines();
    const long = d.add(60_000, () => {});
    for (let i = 0; i < 10_000; i++) d.end(d.add(60_000, () => {}));
    expect(d.size()).toBe(1);
    const line = (d as unknown as { lines: Map<number, { list: unknown[] }> }).lines.get(60_000)!;
    expect(line.list.length).toBeLessThan(2000);
    d.end(long);
    expect(d.size()).toBe(0);
    expect((d as unknown as { lines: Map<number, unknown> }).lines.size).toBe(0);
  });

  test("a limit added from inside a firing one is kept and fires", async () => {
    const d = new CallDeadlines();
    const fired: string[] = [];
    d.add(10, () => {
      fired.push("first");
      d.add(10, () => fired.push("second"));
    });
    await sleep(80);
    expect(fired).toEqual(["first", "second"]);
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

describe("CallDeadlines, re-entrant", () => {
  test("a limit's abort that ends the line's last call and starts another call of that limit: the new one still fires", async () => {
    const d = new CallDeadlines();
    const fired: string[] = [];
    let other: ReturnType<CallDeadlines["add"]> | undefined;
    d.add(10, () => {
      fired.push("first");
      d.end(other!); // the line is now empty and dropped
      d.add(10, () => fired.push("new")); // a new line for the same limit
    });
    other = d.add(10, () => fired.push("other"));
    await sleep(80);
    expect(fired[0]).toBe("first");
    expect(fired).toContain("new");
    expect(d.size()).toBe(0);
  });
});
