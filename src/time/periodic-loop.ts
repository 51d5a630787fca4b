import type { Logger } from "../obs/log.ts";
import { Sleeper } from "./sleeper.ts";

/**
 * The shape every background loop shares: start() (idempotent), stop() (safe twice, waits
 * for the running pass), runOnce() (one bounded pass; what tests call), and a jittered
 * pause between passes so that many processes do not tick in step.
 */
export abstract class PeriodicLoop<R = unknown> {
  private running: Promise<void> | undefined;
  private stopping = false;
  protected readonly sleeper = new Sleeper();
  /** Waiting for the next pass to start (passDone), and for the pass under way to end. */
  private nextPassWaiters: Waiter[] = [];
  private thisPassWaiters: Waiter[] = [];

  constructor(
    protected readonly loopName: string,
    protected readonly log: Logger,
  ) {}

  abstract runOnce(): Promise<R>;
  /** Pause before the next pass, given the last result. */
  protected abstract nextDelayMs(last: R | undefined): number;
  protected onStop(): Promise<void> | void {}

  start(): void {
    if (this.running) return;
    this.stopping = false;
    this.running = this.loop();
  }

  /** Cuts the current pause short. */
  poke(): void {
    this.sleeper.wake();
  }

  /**
   * Resolves when a whole pass has run after this call: one that started after it has ended
   * (a failed pass counts). With `poke`, that pass starts now instead of after the pause.
   * Rejects if the loop stops (or is not running) first. Tests wait on it to know that a
   * loop has looked ("nothing happened in a pass"), where a fixed sleep can end before the
   * loop ran at all on a busy machine and then proves nothing.
   */
  passDone(o: { poke?: boolean } = {}): Promise<void> {
    if (!this.running || this.stopping) return Promise.reject(new Error(`${this.loopName}: not running, no pass to wait for`));
    const p = new Promise<void>((resolve, reject) => this.nextPassWaiters.push({ resolve, reject }));
    if (o.poke) this.poke();
    return p;
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.stopping = true;
    this.sleeper.wake();
    await this.running;
    this.running = undefined;
    const stopped = new Error(`${this.loopName} stopped before the pass waited for`);
    for (const w of this.nextPassWaiters.splice(0)) w.reject(stopped);
    await this.onStop();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let last: R | undefined;
      this.thisPassWaiters = this.nextPassWaiters;
      this.nextPassWaiters = [];
      try {
        last = await this.runOnce();
        failures = 0;
      } catch (err) {
        failures++;
        this.log.error({ err, loop: this.loopName, failures }, `${this.loopName} pass failed; retrying`);
        this.passEnded();
        await this.sleeper.sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)) * (0.5 + Math.random() / 2));
        continue;
      }
      this.passEnded();
      if (this.stopping) break;
      const ms = this.nextDelayMs(last);
      if (ms > 0) await this.sleeper.sleep(ms);
    }
  }

  private passEnded(): void {
    for (const w of this.thisPassWaiters.splice(0)) w.resolve();
  }
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}
