import client from "prom-client";

/**
 * A counter of one label whose increments on the delivery path are tallied in a plain map and
 * folded into prom-client's state when it is read (a scrape, the registry, get()): exact at
 * every read. prom-client's inc() validates the label object and hashes it on every call;
 * per job (a call's outcome, a claimed job's shard) that was two of them a delivery.
 */
export class TallyCounter<T extends string> extends client.Counter<T> {
  private readonly tallies = new Map<string, number>();
  private readonly label: T;

  constructor(config: client.CounterConfiguration<T> & { labelNames: readonly [T] }) {
    super({
      ...config,
      collect(this: client.Counter<T>) {
        (this as TallyCounter<T>).fold();
      },
    });
    this.label = config.labelNames[0];
  }

  /** Counts n (default 1) under this value of the label. */
  tally(value: string, n = 1): void {
    this.tallies.set(value, (this.tallies.get(value) ?? 0) + n);
  }

  override reset(): void {
    // prom-client's constructor calls reset() before this class's fields exist.
    this.tallies?.clear();
    super.reset();
  }

  private fold(): void {
    for (const [value, n] of this.tallies) this.inc({ [this.label]: value } as client.LabelValues<T>, n);
    this.tallies.clear();
  }
}
