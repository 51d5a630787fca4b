// PeriodicLoop on its own: the pass signal tests wait on (passDone), and the shape every
// background loop shares (a stop that waits for the pass under way).
import { expect, test } from "bun:test";
import { silentLogger } from "../../src/obs/log.ts";
import { PeriodicLoop } from "../../src/time/periodic-loop.ts";

/** A loop whose passes the test opens and closes by hand, with a long pause between them. */
class HandLoop extends PeriodicLoop<number> {
  passes = 0;
  failNext = false;
  private gate: { open: () => void; promise: Promise<void> } | undefined;
  constructor(private readonly pauseMs = 60_000) {
    super("hand loop", silentLogger);
  }
  /** The next pass waits until open() is called. */
  hold(): () => void {
    let open!: () => void;
    const promise = new Promise<void>((r) => (open = r));
    this.gate = { open, promise };
    return open;
  }
  async runOnce(): Promise<number> {
    this.passes++;
    const g = this.gate;
    this.gate = undefined;
    if (g) await g.promise;
    if (this.failNext) {
      this.failNext = false;
      throw new Error("this pass fails");
    }
    return this.passes;
  }
  protected nextDelayMs(): number {
    return this.pauseMs;
  }
}

/** Whether p has settled after the event loop has had its turns. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Bun.sleep(0);
  return done;
}

test("passDone waits for a pass that starts after it: not the pass under way, and not a pause", async () => {
  const loop = new HandLoop();
  const open = loop.hold();
  loop.start();
  for (let i = 0; i < 5 && loop.passes === 0; i++) await Bun.sleep(0);
  expect(loop.passes).toBe(1); // the first pass, held open
  const waiting = loop.passDone();
  open();
  // The pass that was under way when passDone was called has ended; the loop now pauses 60 s.
  expect(await settled(waiting)).toBe(false);
  expect(loop.passes).toBe(1);
  loop.poke();
  await waiting;
  expect(loop.passes).toBe(2);
  await loop.stop();
});

test("passDone({ poke: true }) starts that pass now; a pass that fails counts as done", async () => {
  const loop = new HandLoop();
  loop.start();
  for (let i = 0; i < 5 && loop.passes === 0; i++) await Bun.sleep(0);
  await loop.passDone({ poke: true });
  expect(loop.passes).toBe(2);
  loop.failNext = true;
  await loop.passDone({ poke: true });
  expect(loop.passes).toBe(3);
  await loop.stop();
});

test("passDone rejects when the loop stops first, or was not running", async () => {
  const loop = new HandLoop();
  await expect(loop.passDone()).rejects.toThrow("not running");
  loop.start();
  for (let i = 0; i < 5 && loop.passes === 0; i++) await Bun.sleep(0);
  const waiting = loop.passDone();
  await loop.stop();
  await expect(waiting).rejects.toThrow("stopped before the pass waited for");
  expect(loop.passes).toBe(1);
});

test("stop waits for the pass under way, then runs no other", async () => {
  const loop = new HandLoop(0);
  const open = loop.hold();
  loop.start();
  for (let i = 0; i < 5 && loop.passes === 0; i++) await Bun.sleep(0);
  const stopping = loop.stop();
  expect(await settled(stopping)).toBe(false);
  open();
  await stopping;
  expect(loop.passes).toBe(1);
});
