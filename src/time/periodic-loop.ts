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

  async stop(): Promise<void> {
    if (!this.running) return;
    this.stopping = true;
    this.sleeper.wake();
    await this.running;
    this.running = undefined;
    await this.onStop();
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let last: R | undefined;
      try {
        last = await this.runOnce();
        failures = 0;
      } catch (err) {
        failures++;
        this.log.error({ err, loop: this.loopName, failures }, `${this.loopName} pass failed; retrying`);
        await this.sleeper.sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)) * (0.5 + Math.random() / 2));
        continue;
      }
      if (this.stopping) break;
      const ms = this.nextDelayMs(last);
      if (ms > 0) await this.sleeper.sleep(ms);
    }
  }
}
