/**
 * A Map that forgets everything once it holds `max` entries: a cache of what is cheap to make
 * again (a URL's host, a syntax check, a DNS pin), bounded with no bookkeeping per entry.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.size >= this.max && !this.has(key)) this.clear();
    return super.set(key, value);
  }

  /** The value kept for `key`, or `make(key)`, kept. */
  getOrMake(key: K, make: (key: K) => V): V {
    if (this.has(key)) return this.get(key)!;
    const value = make(key);
    this.set(key, value);
    return value;
  }
}
