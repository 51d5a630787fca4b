import { expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../src/config.ts";

test("SCHEDULER_TEST_CLOCK_OFFSET_MS: parsed as whole ms (negative allowed), 0 by default, anything else refused", () => {
  expect(loadConfig({}).testClockOffsetMs).toBe(0);
  expect(loadConfig({ SCHEDULER_TEST_CLOCK_OFFSET_MS: "-20000" }).testClockOffsetMs).toBe(-20_000);
  expect(loadConfig({ SCHEDULER_TEST_CLOCK_OFFSET_MS: "20000" }).testClockOffsetMs).toBe(20_000);
  for (const bad of ["20s", "1.5", "+3", "x"]) expect(() => loadConfig({ SCHEDULER_TEST_CLOCK_OFFSET_MS: bad })).toThrow(ConfigError);
});

test("applyTestClockOffset shifts Date.now(), new Date() and Date(), not Dates built from a value or timers", async () => {
  // In a process of its own: the shift is for the whole process.
  const script = `
    import { applyTestClockOffset } from ${JSON.stringify(`${import.meta.dir}/../../src/time/test-clock.ts`)};
    const before = Date.now();
    applyTestClockOffset(-20000);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 50));
    console.log(JSON.stringify({
      now: Date.now() - before, date: new Date().getTime() - before, str: Date.parse(Date()) - before,
      fixed: new Date(1234).getTime(), isDate: new Date() instanceof Date, utc: Date.UTC(2020, 0, 1), timer: performance.now() - t0,
    }));`;
  const p = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const out = JSON.parse(await new Response(p.stdout).text());
  for (const k of ["now", "date", "str"]) expect(out[k]).toBeLessThan(-19_000);
  expect(out.now).toBeGreaterThan(-20_000);
  expect(out.fixed).toBe(1234);
  expect(out.isDate).toBe(true);
  expect(out.utc).toBe(Date.UTC(2020, 0, 1));
  expect(out.timer).toBeGreaterThanOrEqual(45);
});
