import { describe, expect, test } from "bun:test";
import { hostKey, laneKey } from "../../src/worker/host-lane.ts";
import { HostLimiter, type CallLimits } from "../../src/worker/host-limiter.ts";

// The limiter's own logic, on a clock the test moves (the end-to-end behaviour, with real
// targets and databases, is in host-limits.test.ts).
function limiter(s: { ratePerSec?: number; concurrency?: number; floorPerSec?: number; maxHosts?: number; idleMs?: number } = {}) {
  let t = 1_000_000;
  const l = new HostLimiter<string>({ floorPerSec: 0.5, ...s, now: () => t, random: () => 0.5 });
  return { l, at: () => t, advance: (ms: number) => (t += ms) };
}
const UNLIMITED: CallLimits = { rate: Infinity, concurrency: Infinity };
const ok = (startedAt: number) => ({ outcome: "success" as const, retryAfterMs: null, startedAt, durationMs: 10 });
const throttled = (startedAt: number, retryAfterMs: number | null = null) => ({ outcome: "throttled" as const, retryAfterMs, startedAt, durationMs: 10 });

describe("host limiter", () => {
  test("hosts are host:port, as the URL gives them", () => {
    expect(hostKey("http://127.0.0.1:8080/a?b")).toBe("127.0.0.1:8080");
    expect(hostKey("https://API.example.com/x")).toBe("api.example.com");
    expect(hostKey("https://api.example.com:443/x")).toBe("api.example.com");
  });

  test("lanes: a job with host_limits of its own is limited in its tenant's lane to the host; the others share the host's", () => {
    expect(laneKey("https://hooks.example.com/a", "acme", null)).toBe("hooks.example.com");
    expect(laneKey("https://hooks.example.com/a", "acme", {})).toBe("hooks.example.com");
    expect(laneKey("https://hooks.example.com/a", "acme", { rate: 0.001 })).toBe("hooks.example.com#acme");
    expect(laneKey("https://hooks.example.com/b", "beta", { concurrency: 1 })).toBe("hooks.example.com#beta");
  });

  test("a rate spaces calls evenly: the next waits in memory when it is due soon, else is handed back later", () => {
    const { l, at } = limiter({ ratePerSec: 5 });
    const lim = l.limitsOf(null);
    expect(lim).toEqual({ rate: 5, concurrency: Infinity });
    expect(l.admit("h", "a", lim, "a").kind).toBe("go");
    const b = l.admit("h", "b", lim, "b");
    expect(b).toMatchObject({ kind: "hold", waitMs: 200 });
    // Ten more: the ones expected within the 2 s hold horizon wait here, the rest go back.
    const kinds = Array.from({ length: 12 }, (_, i) => l.admit("h", `c${i}`, lim, `c${i}`).kind);
    expect(kinds.filter((k) => k === "hold").length).toBe(9);
    const d = l.admit("h", "late", lim, "late");
    expect(d.kind).toBe("defer");
    if (d.kind === "defer") expect(d.at).toBeGreaterThan(at() + 2000);
    expect(l.pump(at()).ready).toEqual([]);
  });

  test("held jobs come out in order, one per rate slot, never before", () => {
    const { l, advance } = limiter({ ratePerSec: 10 });
    const lim = l.limitsOf(null);
    for (const id of ["a", "b", "c"]) l.admit("h", id, lim, id);
    expect(l.pump().ready).toEqual([]);
    advance(99);
    expect(l.pump().ready).toEqual([]);
    advance(1);
    expect(l.pump().ready).toEqual(["b"]);
    expect(l.nextWakeAt()).toBe(1_000_000 + 200);
    advance(100);
    expect(l.pump().ready).toEqual(["c"]);
  });

  test("a concurrency cap holds calls until one finishes", () => {
    const { l, at } = limiter({ concurrency: 2 });
    const lim = l.limitsOf(null);
    expect(l.admit("h", "a", lim, "a").kind).toBe("go");
    expect(l.admit("h", "b", lim, "b").kind).toBe("go");
    expect(l.admit("h", "c", lim, "c").kind).toBe("hold");
    expect(l.admit("other", "x", lim, "x").kind).toBe("go");
    expect(l.pump().ready).toEqual([]);
    l.finish("a", ok(at()));
    expect(l.pump().ready).toEqual(["c"]);
  });

  test("the job's own limits beat the settings; among jobs to one host the tightest applies", () => {
    const { l } = limiter({ ratePerSec: 5, concurrency: 1 });
    const loose = l.limitsOf({ rate: 100, concurrency: 10 });
    expect(loose).toEqual({ rate: 100, concurrency: 10 });
    expect(l.limitsOf({ concurrency: 3 })).toEqual({ rate: 5, concurrency: 3 });
    expect(l.admit("h", "a", loose, "a").kind).toBe("go");
    expect(l.admit("h", "b", loose, "b").kind).toBe("hold"); // 10 ms later at 100/s
    // A tight job to the same host: while it is held or in flight, every call is paced by it.
    const tight: CallLimits = { rate: 2, concurrency: 10 };
    expect(l.admit("h", "t", tight, "t").kind).toBe("hold");
    expect(l.allowedRate("h")).toBe(2);
  });

  test("429s halve the rate down to the floor; successes raise it back to the limit; other hosts are untouched", () => {
    const { l, at, advance } = limiter({ ratePerSec: 20 });
    const lim = l.limitsOf(null);
    let n = 0;
    const call = (host: string, answer: "ok" | "429", gap = 1000) => {
      const id = `j${n++}`;
      expect(l.admit(host, id, lim, id).kind).toBe("go");
      const started = at();
      advance(5);
      l.finish(id, answer === "ok" ? ok(started) : throttled(started));
      advance(gap);
    };
    // Called at its limit (20/s, the calls 50 ms apart), then a 429: half of that.
    for (let i = 0; i < 40; i++) call("slow", "ok", 45);
    call("slow", "429");
    expect(l.allowedRate("slow")).toBe(10);
    const seen = [];
    for (let i = 0; i < 6; i++) {
      call("slow", "429", 2100);
      seen.push(l.allowedRate("slow"));
    }
    expect(seen).toEqual([5, 2.5, 1.25, 0.625, 0.5, 0.5]);
    expect(l.throttledHosts(at())).toBe(1);
    call("fast", "ok");
    expect(l.allowedRate("fast")).toBe(20);
    let steps = 0;
    while (l.allowedRate("slow") < 20 && steps < 100) {
      advance(2000);
      call("slow", "ok");
      steps++;
    }
    expect(l.allowedRate("slow")).toBe(20);
    expect(steps).toBeGreaterThan(3); // additive: not in one jump
    expect(l.throttledHosts(at())).toBe(0);
  });

  test("an unlimited host is slowed from the rate it was called at, and unlimited again once it is back there", () => {
    const { l, at, advance } = limiter({});
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const id = `a${i}`;
      expect(l.admit("h", id, UNLIMITED, id).kind).toBe("go");
      ids.push(id);
      advance(25); // 40 calls a second
    }
    const t = at();
    l.finish(ids[39]!, throttled(t - 1));
    // Answers to calls made before that decrease do not halve it again.
    l.finish(ids[38]!, throttled(t - 30));
    const slowed = l.allowedRate("h");
    expect(slowed).toBeGreaterThan(15);
    expect(slowed).toBeLessThan(25);
    for (const id of ids.slice(0, 38)) l.finish(id, ok(t - 40));
    expect(l.allowedRate("h")).toBe(slowed);
    let k = 0;
    while (Number.isFinite(l.allowedRate("h")) && k < 200) {
      advance(100);
      const id = `b${k++}`;
      l.admit("h", id, UNLIMITED, id);
      l.pump();
      l.finish(id, ok(at()));
    }
    expect(l.allowedRate("h")).toBe(Infinity);
  });

  test("Retry-After pauses the host outright; jobs wait past it, in memory or handed back after it", () => {
    const { l, at, advance } = limiter({});
    expect(l.admit("h", "a", UNLIMITED, "a").kind).toBe("go");
    l.finish("a", throttled(at(), 1500));
    const b = l.admit("h", "b", UNLIMITED, "b");
    expect(b.kind).toBe("hold");
    advance(1499);
    expect(l.pump().ready).toEqual([]);
    advance(1);
    expect(l.pump().ready).toEqual(["b"]);
    l.finish("b", throttled(at(), 60_000));
    const c = l.admit("h", "c", UNLIMITED, "c");
    expect(c.kind).toBe("defer");
    if (c.kind === "defer") expect(c.at).toBeGreaterThanOrEqual(at() + 60_000);
    expect(l.throttledHosts(at())).toBe(1);
  });

  test("a job held too long (calls to its host hang) is handed back; cancelled ones are dropped", () => {
    const { l, advance } = limiter({ concurrency: 1 });
    const lim = l.limitsOf(null);
    l.admit("h", "a", lim, "a");
    expect(l.admit("h", "b", lim, "b").kind).toBe("hold");
    expect(l.admit("h", "c", lim, "c").kind).toBe("hold");
    expect(l.removeHeld((x) => x === "c")).toEqual(["c"]);
    advance(5000);
    const { ready, overdue } = l.pump();
    expect(ready).toEqual([]);
    expect(overdue.map((o) => o.item)).toEqual(["b"]);
    expect(l.held).toBe(0);
  });

  test("memory is bounded: idle hosts are forgotten, and at most maxHosts are kept", () => {
    const { l, at, advance } = limiter({ idleMs: 60_000, maxHosts: 50 });
    for (let i = 0; i < 200; i++) {
      const id = `j${i}`;
      l.admit(`h${i}`, id, UNLIMITED, id);
      l.finish(id, ok(at()));
      advance(1);
    }
    expect(l.size).toBeLessThanOrEqual(51);
    advance(60_000);
    l.sweep();
    expect(l.size).toBe(0);
  });
});
