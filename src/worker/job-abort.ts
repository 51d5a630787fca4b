/**
 * A claimed job's abort (a cancel, a stop, a lost lease) that reaches the call in flight
 * without an event listener: the call's own controller is kept here while it runs and aborted
 * with the job. An "abort" listener added and removed on the job's signal for every call cost
 * ~3 µs of the JS thread a call (bench/README.md, part 20).
 */
export class JobAbort extends AbortController {
  /** The running call's controller, if a call is running. */
  call: AbortController | null = null;

  override abort(reason?: unknown): void {
    super.abort(reason);
    // The signal's reason: an abort without one gets the standard AbortError, as the job's does.
    this.call?.abort(this.signal.reason);
  }
}
