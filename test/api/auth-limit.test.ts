import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tokenSpec } from "../helpers/tokens.ts";
import { AuthFailureLimiter } from "../../src/api/auth-limiter.ts";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { eventually } from "../helpers/target.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { bearer, expectError } from "./support.ts";

describe("AuthFailureLimiter", () => {
  const opts = { maxFailures: 3, windowMs: 1000, blockMs: 5000, maxClients: 100 };

  test("blocks a client after its allowed failures within the window, for the block time", () => {
    const l = new AuthFailureLimiter(opts);
    l.fail("a", 0);
    l.fail("a", 10);
    expect(l.blockedFor("a", 20)).toBe(0);
    l.fail("a", 20);
    expect(l.blockedFor("a", 21)).toBe(4999);
    expect(l.blockedFor("b", 21)).toBe(0);
    expect(l.blockedFor("a", 5020)).toBe(0);
  });

  test("failures spread beyond the window do not add up", () => {
    const l = new AuthFailureLimiter(opts);
    for (let t = 0; t < 20_000; t += 600) l.fail("a", t); // two per window at most
    expect(l.blockedFor("a", 20_000)).toBe(0);
  });

  test("memory stays bounded however many clients fail", () => {
    const l = new AuthFailureLimiter(opts);
    for (let i = 0; i < 50_000; i++) l.fail(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, i);
    expect(l.tracked).toBe(100);
  });

  test("0 turns it off", () => {
    const l = new AuthFailureLimiter({ ...opts, maxFailures: 0 });
    for (let i = 0; i < 100; i++) l.fail("a", i);
    expect(l.blockedFor("a", 100)).toBe(0);
    expect(l.tracked).toBe(0);
  });
});

describe("failed authentication limit through the API", () => {
  let tdb: TestDb;
  let rt: Runtime;
  let peer: Runtime;
  let untrusted: Runtime;
  const TOKENS = tokenSpec("tokA:acme:jobs:read,jobs:write");
  beforeAll(async () => {
    tdb = await freshDb("pglite");
    const limits = { SCHEDULER_TOKENS: TOKENS, SCHEDULER_AUTH_FAILURE_LIMIT: "5", SCHEDULER_AUTH_FAILURE_WINDOW: "1m", SCHEDULER_AUTH_BLOCK: "2s" };
    // Behind a proxy the client is named by a header: loopback tests can be several clients.
    rt = await startScheduler(tdb.db, { ...limits, SCHEDULER_CLIENT_IP_HEADER: "x-client-ip", SCHEDULER_TRUSTED_PROXIES: "127.0.0.1,::1" }, { mode: "api" });
    peer = await startScheduler(tdb.db, limits, { mode: "api" });
    // The header is configured, but these test clients (loopback) are not the proxy.
    untrusted = await startScheduler(
      tdb.db,
      { ...limits, SCHEDULER_CLIENT_IP_HEADER: "x-client-ip", SCHEDULER_TRUSTED_PROXIES: "10.0.0.0/8,fdaa::/16" },
      { mode: "api" },
    );
  });
  afterAll(async () => {
    await Promise.all([rt?.stop(), peer?.stop(), untrusted?.stop()]);
    await tdb?.close();
  });

  const as = (ip: string, token?: string) => ({ "x-client-ip": ip, ...(token ? bearer(token) : {}) });

  test("after 5 failures a client gets 429 with Retry-After, even with a good token; others are unaffected; it ends", async () => {
    const attacker = "198.51.100.7";
    for (let i = 0; i < 5; i++) expectError(await api(rt, "GET", "/v1/jobs", undefined, as(attacker, `guess${i}`)), 401);
    const blocked = await api(rt, "GET", "/v1/jobs", undefined, as(attacker, "tokA"));
    expect(expectError(blocked, 429).code).toBe("too_many_auth_failures");
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(blocked.headers.get("retry-after"))).toBeLessThanOrEqual(2);
    // The proxy's entry is the last one: a client cannot pick its own name by prepending.
    expectError(await api(rt, "GET", "/v1/jobs", undefined, { "x-client-ip": `203.0.113.1, ${attacker}`, ...bearer("tokA") }), 429);
    // Another client: a good token works, a bad one is an ordinary 401.
    expect((await api(rt, "GET", "/v1/jobs", undefined, as("198.51.100.8", "tokA"))).status).toBe(200);
    expectError(await api(rt, "GET", "/v1/jobs", undefined, as("198.51.100.8", "nope")), 401);
    // Health and metrics are not behind auth.
    expect((await api(rt, "GET", "/healthz", undefined, as(attacker))).status).toBe(200);
    const metrics = await (await fetch(`${rt.url}/metrics`)).text();
    expect(metrics).toMatch(/scheduler_auth_throttled_total [1-9]/);
    // It ends: within the Retry-After it was given (at most 2 s), not on a fixed sleep.
    const blockedAt = Date.now();
    await eventually(async () => (await api(rt, "GET", "/v1/jobs", undefined, as(attacker, "tokA"))).status === 200, 4000, "the block to end");
    expect(Date.now() - blockedAt).toBeLessThan(2500);
  });

  test("the client header is believed only from the trusted proxies: others cannot pick a fresh name per guess", async () => {
    for (let i = 0; i < 5; i++) expectError(await api(untrusted, "GET", "/v1/jobs", undefined, as(`198.51.100.${10 + i}`, `guess${i}`)), 401);
    expectError(await api(untrusted, "GET", "/v1/jobs", undefined, as("198.51.100.99", "tokA")), 429);
  });

  test("without a client header the peer address is the client", async () => {
    for (let i = 0; i < 5; i++) expectError(await api(peer, "GET", "/v1/jobs", undefined, bearer(`x${i}`)), 401);
    expectError(await api(peer, "GET", "/v1/jobs", undefined, bearer("tokA")), 429);
    // A header the scheduler was not told to trust changes nothing.
    expectError(await api(peer, "GET", "/v1/jobs", undefined, { "x-client-ip": "192.0.2.1", ...bearer("tokA") }), 429);
  });
});
