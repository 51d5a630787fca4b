import { expect, test } from "bun:test";
import { Sleeper } from "../../src/time/sleeper.ts";

test("sleep ends at its timeout, or early on wake()", async () => {
  const s = new Sleeper();
  let t = performance.now();
  await s.sleep(50);
  expect(performance.now() - t).toBeGreaterThanOrEqual(45);
  t = performance.now();
  setTimeout(() => s.wake(), 10);
  await s.sleep(5000);
  expect(performance.now() - t).toBeLessThan(500);
});

test("wakeAt shortens a sleep; a later instant does not lengthen it", async () => {
  const s = new Sleeper();
  const t = performance.now();
  setTimeout(() => s.wakeAt(Date.now() + 30), 5);
  setTimeout(() => s.wakeAt(Date.now() + 3000), 10);
  await s.sleep(5000);
  expect(performance.now() - t).toBeLessThan(500);
});

test("a wake() or a wakeAt() that arrives while awake is kept for the next sleep", async () => {
  const s = new Sleeper();
  s.wake();
  let t = performance.now();
  await s.sleep(5000);
  expect(performance.now() - t).toBeLessThan(100);
  s.wakeAt(Date.now() + 40);
  t = performance.now();
  await s.sleep(5000);
  const took = performance.now() - t;
  expect(took).toBeGreaterThanOrEqual(30);
  expect(took).toBeLessThan(500);
});
