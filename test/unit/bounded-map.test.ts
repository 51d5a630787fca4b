/** BoundedMap: the caches of URL hosts, syntax checks, DNS pins, rate buckets and cron rules are bounded by it. */
import { describe, expect, test } from "bun:test";
import { BoundedMap } from "../../src/bounded-map.ts";

describe("BoundedMap", () => {
  test("forgets everything when a new key comes to a full map, and keeps the new one", () => {
    const m = new BoundedMap<string, number>(3);
    m.set("a", 1).set("b", 2).set("c", 3);
    // Updating a key it holds is not growth.
    m.set("a", 10);
    expect([...m]).toEqual([
      ["a", 10],
      ["b", 2],
      ["c", 3],
    ]);
    m.set("d", 4);
    expect([...m]).toEqual([["d", 4]]);
  });

  test("getOrMake makes a value once and keeps it (a made undefined or null counts as kept)", () => {
    const m = new BoundedMap<string, string | null>(10);
    let made = 0;
    const make = (k: string) => {
      made++;
      return k === "bad" ? null : k.toUpperCase();
    };
    expect(m.getOrMake("x", make)).toBe("X");
    expect(m.getOrMake("x", make)).toBe("X");
    expect(m.getOrMake("bad", make)).toBeNull();
    expect(m.getOrMake("bad", make)).toBeNull();
    expect(made).toBe(2);
  });
});
