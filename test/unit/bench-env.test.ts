import { describe, expect, test } from "bun:test";
import { benchEnv } from "../../bench/lib/scheduler-process.ts";

// SCHEDULER_BENCH_ENV (bench/README.md, "creation"): variables for the scheduler's process only.
describe("SCHEDULER_BENCH_ENV", () => {
  test("NAME=VALUE pairs separated by spaces; a value may hold '='", () => {
    expect(benchEnv(" BUN_JSC_useFTLJIT=0  MIMALLOC_PURGE_DELAY=-1 X=a=b ")).toEqual({ BUN_JSC_useFTLJIT: "0", MIMALLOC_PURGE_DELAY: "-1", X: "a=b" });
  });

  test("unset or empty: nothing", () => {
    expect(benchEnv(undefined)).toEqual({});
    expect(benchEnv("")).toEqual({});
  });

  test("a pair without a name or '=' is refused, named", () => {
    expect(() => benchEnv("BUN_JSC_useFTLJIT")).toThrow('SCHEDULER_BENCH_ENV: "BUN_JSC_useFTLJIT" is not NAME=VALUE');
    expect(() => benchEnv("=1")).toThrow('"=1" is not NAME=VALUE');
  });
});
