import { describe, expect, test } from "bun:test";
import { procCpuSeconds } from "../../bench/lib/scheduler-process.ts";
import { perJob, threadCpuSeconds, threadKind } from "../../bench/lib/thread-cpu.ts";

// bench:peers' "of which" rows (bench/README.md, part 19): a process's CPU split by its threads.
describe("thread CPU", () => {
  test("threads are told apart by their names as Bun and JavaScriptCore set them", () => {
    expect(threadKind(100, 100, "bun")).toBe("js");
    expect(threadKind(101, 100, "HTTP Client")).toBe("http");
    expect(threadKind(102, 100, "JITWorker")).toBe("jit");
    expect(threadKind(103, 100, "HeapHelper")).toBe("other");
    expect(threadKind(104, 100, "mi-scavenger")).toBe("other");
  });

  test("this process: the JS thread's work shows as js, and the parts add up to the process's time", () => {
    const before = threadCpuSeconds(process.pid)!;
    // 0.3 s of this thread's CPU, however long a busy machine takes to give it. Counted on the
    // thread the reader calls js: read as the process's time, the JIT and the collector (busy
    // with other test files in the suite) took a share of it, and js once read under 0.2 s. A
    // reader that named another thread js would see it grow by little, and time out here.
    const deadline = performance.now() + 20_000;
    let x = 0;
    const js = () => threadCpuSeconds(process.pid)!.js - before.js;
    while (js() < 0.3 - 1e-9 && performance.now() < deadline) for (let i = 0; i < 100_000; i++) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    const after = threadCpuSeconds(process.pid)!;
    const whole = procCpuSeconds(process.pid)!;
    // 10 ms ticks summed as floats: 0.3 s of ticks can read 0.29999… here.
    expect(after.js - before.js).toBeGreaterThanOrEqual(0.3 - 1e-9);
    const sum = after.js + after.http + after.jit + after.other;
    // Threads that ended are in the process's figure only; 10 ms ticks per thread.
    expect(sum).toBeLessThanOrEqual(whole + 0.01 * 64);
    expect(sum).toBeGreaterThan(whole * 0.5);
  });

  test("a process that is gone: none", () => {
    expect(threadCpuSeconds(2 ** 30)).toBeUndefined();
  });

  test("per job: µs of each part between two readings", () => {
    const r = perJob({ js: 1, http: 0.5, jit: 0.2, other: 0 }, { js: 1.1, http: 0.52, jit: 0.2, other: 0.01 }, 1000);
    expect(r.js).toBeCloseTo(100, 6);
    expect(r.http).toBeCloseTo(20, 6);
    expect(r.jit).toBeCloseTo(0, 6);
    expect(r.other).toBeCloseTo(10, 6);
  });
});
