// The REST fixture itself: if it spoke the protocol wrongly, the Upstash suite would prove
// nothing. Raw HTTP here, no client library.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Redis } from "@upstash/redis";
import { redisScratch, testRedisUrl, type RedisScratch } from "../helpers/redis.ts";
import { startUpstashRest, type UpstashRestFixture } from "../helpers/upstash-rest.ts";

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

describe("upstash REST fixture", () => {
  let f: UpstashRestFixture;
  let s: RedisScratch;
  beforeAll(async () => {
    f = await startUpstashRest({ redisUrl: testRedisUrl() });
    s = await redisScratch("rest");
  });
  afterAll(async () => {
    await s?.cleanup();
    await f?.stop();
  });

  const call = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${f.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${f.token}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const k = (name: string) => `${s.prefix}:${name}`;

  test("no token or a wrong token: 401 with an error body", async () => {
    const none = await fetch(`${f.url}/`, { method: "POST", body: JSON.stringify(["PING"]) });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: "Unauthorized" });
    const wrong = await call("/", ["PING"], { authorization: "Bearer nope" });
    expect(wrong.status).toBe(401);
  });

  test("single command: strings base64 except OK, integers stay numbers, null stays null", async () => {
    const enc = { "upstash-encoding": "base64" };
    expect(await (await call("/", ["SET", k("a"), "héllo ✓"], enc)).json()).toEqual({ result: "OK" });
    expect(await (await call("/", ["GET", k("a")], enc)).json()).toEqual({ result: b64("héllo ✓") });
    expect(await (await call("/", ["PING"], enc)).json()).toEqual({ result: b64("PONG") });
    expect(await (await call("/", ["ZADD", k("z"), 1_900_000_000_123, "m1", 5, "007"], enc)).json()).toEqual({ result: 2 });
    expect(await (await call("/", ["GET", k("missing")], enc)).json()).toEqual({ result: null });
    // Arrays, recursively; RESP2 shape (flat, scores as strings).
    const r = await (await call("/", ["ZRANGE", k("z"), "-inf", "+inf", "BYSCORE", "LIMIT", 0, 10, "WITHSCORES"], enc)).json();
    expect(r).toEqual({ result: [b64("007"), b64("5"), b64("m1"), b64("1900000000123")] });
  });

  test("without Upstash-Encoding, results are plain", async () => {
    await call("/", ["SET", k("p"), "plain"]);
    expect(await (await call("/", ["GET", k("p")])).json()).toEqual({ result: "plain" });
    await call("/", ["ZADD", k("pz"), "3", "x"]);
    expect(await (await call("/", ["ZRANGE", k("pz"), "0", "-1", "WITHSCORES"])).json()).toEqual({ result: ["x", "3"] });
  });

  test("a failing single command is a 400 with the Redis error", async () => {
    await call("/", ["SET", k("str"), "v"]);
    const res = await call("/", ["ZADD", k("str"), "1", "m"], { "upstash-encoding": "base64" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toMatch(/^WRONGTYPE/);
  });

  test("pipeline: one result or error per command, in order", async () => {
    await call("/", ["SET", k("s2"), "v"]);
    const res = await call(
      "/pipeline",
      [
        ["SET", k("q"), "1"],
        ["INCR", k("q")],
        ["ZADD", k("s2"), "1", "m"],
        ["GET", k("q")],
      ],
      { "upstash-encoding": "base64" },
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as any[];
    expect(body[0]).toEqual({ result: "OK" });
    expect(body[1]).toEqual({ result: 2 });
    expect(body[2].error).toMatch(/^WRONGTYPE/);
    expect(body[3]).toEqual({ result: b64("2") });
    expect(f.requests.at(-1)).toMatchObject({ path: "/pipeline", commands: 4 });
  });

  test("multi-exec: runs as one transaction; a queueing error aborts all of it", async () => {
    const ok = await (
      await call(
        "/multi-exec",
        [
          ["SET", k("m"), "1"],
          ["INCRBY", k("m"), 4],
          ["GET", k("m")],
        ],
        { "upstash-encoding": "base64" },
      )
    ).json();
    expect(ok).toEqual([{ result: "OK" }, { result: 5 }, { result: b64("5") }]);
    const aborted = await call("/multi-exec", [["SET", k("m"), "100"], ["NOSUCHCOMMAND"]]);
    expect(aborted.status).toBe(400);
    expect(((await aborted.json()) as any).error).toMatch(/EXECABORT/);
    expect(await s.client.send("GET", [k("m")])).toBe("5");
    // The transaction connection is usable after the abort.
    expect(await (await call("/multi-exec", [["INCR", k("m")]])).json()).toEqual([{ result: 6 }]);
  });

  test("bad requests: not JSON, not a command, unknown path", async () => {
    const notJson = await fetch(`${f.url}/`, { method: "POST", headers: { authorization: `Bearer ${f.token}` }, body: "{" });
    expect(notJson.status).toBe(400);
    expect((await call("/", [])).status).toBe(400);
    expect((await call("/pipeline", [["PING"], "PING"])).status).toBe(400);
    expect((await call("/nope", ["PING"])).status).toBe(404);
  });

  test("@upstash/redis through the fixture: unicode and numeric-looking members come back as sent", async () => {
    const redis = new Redis({ url: f.url, token: f.token, automaticDeserialization: false, retry: { retries: 0 }, enableTelemetry: false });
    const members = ["007", "1e3", "12345", "jöb-✓", "OK", "null"];
    await redis.zadd(k("u"), ...(members.map((member, i) => ({ score: i, member })) as [{ score: number; member: string }]));
    expect(await redis.zrange(k("u"), 0, -1)).toEqual(members);
    expect(await redis.zrange(k("u"), 0, 1, { withScores: true })).toEqual(["007", "0", "1e3", "1"]);
    const p = redis.pipeline();
    p.zcard(k("u"));
    p.get(k("none"));
    expect(await p.exec()).toEqual([6, null]);
    const tx = redis.multi();
    tx.set(k("t"), "v");
    tx.get(k("t"));
    expect(await tx.exec()).toEqual(["OK", "v"]);
  });
});
