/**
 * A loopback webhook target that answers 200 at once and records when each call arrived
 * (Date.now(), the same wall clock as due_at), keyed by its webhook-id header (or another:
 * a schedule's occurrences are known ahead by their Idempotency-Key, not by their ids), and
 * the Scheduler-Scheduled-For header each job's first call carried.
 */
export class RecordingTarget {
  /** webhook-id → arrival times (ms since the epoch), in arrival order. */
  readonly arrivals = new Map<string, number[]>();
  /** Calls whose webhook-id was not announced with expect(). */
  unexpected = 0;
  /** Calls without a webhook-id header. */
  withoutId = 0;
  /** webhook-id → Scheduler-Scheduled-For of its first call (ms since the epoch; NaN if absent or unparseable). */
  readonly scheduledFor = new Map<string, number>();
  /** Calls (first or repeated) that arrived before the Scheduler-Scheduled-For they carried, or carried none. */
  beforeScheduledFor = 0;
  private readonly phaseOf = new Map<string, number>();
  private readonly firstCalls: number[] = [];
  private readonly server: ReturnType<typeof Bun.serve>;

  constructor(keyHeader = "webhook-id") {
    this.server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      fetch: (req) => {
        const at = Date.now();
        const id = req.headers.get(keyHeader);
        const sf = Date.parse(req.headers.get("scheduler-scheduled-for") ?? "");
        if (!(at >= sf)) this.beforeScheduledFor++;
        if (id === null) {
          this.withoutId++;
        } else {
          const seen = this.arrivals.get(id);
          if (seen) seen.push(at);
          else {
            this.arrivals.set(id, [at]);
            this.scheduledFor.set(id, sf);
            const phase = this.phaseOf.get(id);
            if (phase === undefined) this.unexpected++;
            else this.firstCalls[phase]++;
          }
        }
        return new Response("ok");
      },
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}/hook`;
  }

  /** Announces the jobs of a phase so delivered() can count them as they arrive. */
  expect(phase: number, ids: Iterable<string>): void {
    this.firstCalls[phase] ??= 0;
    for (const id of ids) {
      this.phaseOf.set(id, phase);
      // A call may beat the batch response that told us its id.
      if (this.arrivals.has(id)) {
        this.unexpected--;
        this.firstCalls[phase]++;
      }
    }
  }

  /** How many distinct jobs of the phase have been called at least once. */
  delivered(phase: number): number {
    return this.firstCalls[phase] ?? 0;
  }

  stop(): void {
    this.server.stop(true);
  }
}
