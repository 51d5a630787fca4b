/**
 * Everything the drill starts registers how to undo it here; undo runs newest first (a
 * server stops before its directory is removed), each step whatever happened to the
 * others, once. `runSync` is the last resort from a process "exit" handler, where nothing
 * asynchronous runs any more: it only sends signals and removes files.
 */
interface Step {
  name: string;
  undo: () => Promise<unknown> | unknown;
  undoSync?: () => void;
}

export class Cleanup {
  private steps: Step[] = [];
  private running: Promise<string[]> | undefined;

  /** Registers a step; returns a function that runs it now (and unregisters it). */
  add(name: string, undo: () => Promise<unknown> | unknown, undoSync?: () => void): () => Promise<void> {
    const step: Step = { name, undo, undoSync };
    this.steps.push(step);
    return async () => {
      const i = this.steps.indexOf(step);
      if (i < 0) return;
      this.steps.splice(i, 1);
      await step.undo();
    };
  }

  /** Set once the drill was interrupted (SIGINT/SIGTERM): everything goes, nothing is kept. */
  interrupted = false;

  /** Marks the run interrupted and undoes everything. */
  interrupt(): Promise<string[]> {
    this.interrupted = true;
    return this.run();
  }

  get size(): number {
    return this.steps.length;
  }

  /** Runs every step, newest first; resolves with the failures ("name: message"), never rejects. */
  run(): Promise<string[]> {
    this.running ??= (async () => {
      const failures: string[] = [];
      while (this.steps.length > 0) {
        const step = this.steps.pop()!;
        try {
          await step.undo();
        } catch (err) {
          failures.push(`${step.name}: ${(err as Error)?.message ?? String(err)}`);
        }
      }
      this.running = undefined;
      return failures;
    })();
    return this.running;
  }

  /** Synchronous best effort, for process exit: kills, signals, rm. */
  runSync(): void {
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        step.undoSync?.();
      } catch {
        // best effort: the next step must still run
      }
    }
  }
}
