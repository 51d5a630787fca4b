import client from "prom-client";

/** prom-client's own state of a histogram (lib/histogram.js, 15.x): one entry per label set. */
interface Internals {
  upperBounds: readonly number[];
  hashMap: Record<string, { bucketValues: Record<string, number>; sum: number; count: number } | undefined>;
}

/**
 * A histogram without labels whose observe() is a bucket search and three additions. Its
 * counts live in prom-client's own entry for the empty label set, so /metrics, reset() and
 * the registry read it as any histogram. prom-client's observe() makes two objects and a
 * closure, checks and hashes the (empty) labels and turns the bucket's bound into a property
 * name on every call: in a burst the worker observes four of these per job.
 * Anything but a plain finite value (labels, a NaN) goes to prom-client's own observe(),
 * which accepts or refuses it as before.
 */
export class FastHistogram extends client.Histogram<string> {
  constructor(config: client.HistogramConfiguration<string>) {
    super(config);
    const self = this as unknown as Internals;
    const bounds = self.upperBounds;
    // The property names prom-client keys its buckets by, made once.
    const keys = bounds.map(String);
    const slow = this.observe.bind(this);
    const fast = (a: number | client.LabelValues<string>, b?: number): void => {
      const entry = self.hashMap[""];
      if (typeof a !== "number" || b !== undefined || !Number.isFinite(a) || entry === undefined) {
        if (typeof a === "number") slow(a);
        else slow(a, b as number);
        return;
      }
      entry.sum += a;
      entry.count += 1;
      for (let i = 0; i < bounds.length; i++) {
        if (a <= bounds[i]!) {
          entry.bucketValues[keys[i]!]! += 1;
          return;
        }
      }
    };
    this.observe = fast as typeof this.observe;
  }
}
