/**
 * Test-only: shifts this process's wall clock by offsetMs, as on a host whose clock is off.
 * Date.now() and `new Date()` (and `Date()`) read the shifted clock; a Date built from a
 * value is untouched, and so are performance.now() and timers (monotonic, not wall-clock).
 * The chaos suite uses it to prove that a process clock never decides what is due.
 */
export function applyTestClockOffset(offsetMs: number): void {
  if (offsetMs === 0) return;
  const Real = globalThis.Date;
  const realNow = Real.now.bind(Real);
  const now = () => realNow() + offsetMs;
  globalThis.Date = new Proxy(Real, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget),
    apply: () => new Real(now()).toString(),
    get: (target, prop, receiver) => (prop === "now" ? now : Reflect.get(target, prop, receiver)),
  });
}
