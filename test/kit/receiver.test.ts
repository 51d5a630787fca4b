import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Hono } from "hono";
import postgres from "postgres";
import { Webhook } from "standardwebhooks";
import {
  checkWebhook,
  createReceiver,
  honoVerify,
  honoWebhook,
  memoryFencing,
  migrateReceiver,
  once,
  onceWithInfo,
  pgFencing,
  processedStatus,
  pruneProcessed,
  ReceiverError,
  verifyHandler,
  webhookHandler,
  type WebhookEnv,
} from "../../src/kit/receiver/index.ts";
import { createDatabase, dropDatabase } from "../helpers/db.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER = `whsec_${Buffer.from("another-secret-of-32-bytes-long!").toString("base64")}`;

/** A call as the scheduler signs it (reference implementation of Standard Webhooks). */
function signed(body: string, o: { id?: string; secret?: string; at?: Date; token?: string; extra?: Record<string, string> } = {}) {
  const id = o.id ?? crypto.randomUUID();
  const at = o.at ?? new Date();
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(o.secret ?? SECRET).sign(id, at, body),
    "scheduler-fencing-token": o.token ?? "5",
    "scheduler-attempt": "1",
    ...o.extra,
  };
}

describe("receiver: Standard Webhooks verification", () => {
  test("the published test vector verifies (its own clock), a changed body does not", async () => {
    const r = createReceiver({ secrets: SECRET, now: () => 1614265330_000 });
    const headers = {
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    };
    const call = await checkWebhook(r, { headers, body: '{"test": 2432232314}' });
    expect(call.id).toBe("msg_p5jXN8AQM9LWM0D4loKWxJek");
    expect(call.json()).toEqual({ test: 2432232314 });
    const bad = await checkWebhook(r, { headers, body: '{"test": 2432232315}' }).catch((e) => e);
    expect(bad).toBeInstanceOf(ReceiverError);
    expect(bad).toMatchObject({ code: "invalid_signature", status: 401 });
  });

  test("timestamp tolerance is a setting; outside it the call is refused", async () => {
    const body = "{}";
    const old = signed(body, { at: new Date(Date.now() - 120_000) });
    await expect(checkWebhook({ secrets: SECRET, toleranceSec: 60 }, { headers: old, body })).rejects.toMatchObject({
      code: "timestamp_out_of_range",
      status: 401,
    });
    expect((await checkWebhook({ secrets: SECRET, toleranceSec: 300 }, { headers: old, body })).id).toBe(old["webhook-id"]);
    const future = signed(body, { at: new Date(Date.now() + 120_000) });
    await expect(checkWebhook({ secrets: SECRET, toleranceSec: 60 }, { headers: future, body })).rejects.toMatchObject({ code: "timestamp_out_of_range" });
  });

  test("rotation: with several secrets, a call signed by any one of them (or carrying several signatures) verifies", async () => {
    const body = '{"a":1}';
    const byOther = signed(body, { secret: OTHER });
    const r = createReceiver({ secrets: [SECRET, OTHER] });
    expect((await checkWebhook(r, { headers: byOther, body })).id).toBe(byOther["webhook-id"]);
    await expect(checkWebhook({ secrets: SECRET }, { headers: byOther, body })).rejects.toMatchObject({ code: "invalid_signature" });
    // The scheduler sends one v1 signature per active key, space separated.
    const both = signed(body);
    both["webhook-signature"] += ` ${new Webhook(OTHER).sign(both["webhook-id"], new Date(Number(both["webhook-timestamp"]) * 1000), body)}`;
    expect((await checkWebhook({ secrets: OTHER }, { headers: both, body })).id).toBe(both["webhook-id"]);
  });

  test("missing headers: 400; Node-style header objects work too", async () => {
    await expect(checkWebhook({ secrets: SECRET }, { headers: {}, body: "" })).rejects.toMatchObject({ code: "missing_headers", status: 400 });
    const h = signed("x");
    const nodeStyle = Object.fromEntries(Object.entries(h).map(([k, v]) => [k, [v]]));
    expect((await checkWebhook({ secrets: SECRET }, { headers: nodeStyle, body: "x" })).attempt).toBe(1);
  });

  test("a bad secret fails at setup, not per call", () => {
    expect(() => createReceiver({ secrets: "whsec_***" })).toThrow(/base64/);
    expect(() => createReceiver({ secrets: [] })).toThrow(/at least one/);
  });
});

describe("receiver: fencing per job", () => {
  test("memory: a token lower than the highest seen for the job is refused with 409; equal and higher go ahead; other jobs are apart", async () => {
    const handler = webhookHandler({ secrets: SECRET, fencing: memoryFencing() }, (call) => ({ token: String(call.fencingToken) }));
    const send = (id: string, token: string) => {
      const h = signed("{}", { id, token });
      return handler(new Request("http://r/hook", { method: "POST", headers: h, body: "{}" }));
    };
    expect((await send("job-1", "10")).status).toBe(200);
    expect((await send("job-1", "10")).status).toBe(200);
    const stale = await send("job-1", "9");
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as any).error.code).toBe("stale_fencing_token");
    expect((await send("job-1", String(2n ** 33n))).status).toBe(200);
    expect((await send("job-1", "11")).status).toBe(409);
    expect((await send("job-2", "1")).status).toBe(200);
  });
});

describe("receiver: PostgreSQL parts", () => {
  let url: string;
  let sql: postgres.Sql;
  beforeAll(async () => {
    url = await createDatabase();
    sql = postgres(url, { max: 12, onnotice: () => {} });
    await migrateReceiver(sql);
    await migrateReceiver(sql); // idempotent
    await sql`CREATE TABLE effects (webhook_id text, n int)`;
  });
  afterAll(async () => {
    await sql?.end();
    if (url) await dropDatabase(url);
  });

  test("once: the effect runs once; repeats (sequential and concurrent) return the first result", async () => {
    let runs = 0;
    const effect = async (tx: postgres.TransactionSql) => {
      runs++;
      await tx`INSERT INTO effects VALUES ('w1', ${runs})`;
      await Bun.sleep(50);
      return { charged: 42, run: runs };
    };
    const results = await Promise.all(Array.from({ length: 8 }, () => onceWithInfo(sql, "w1", effect)));
    expect(runs).toBe(1);
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    for (const r of results) expect(r.result).toEqual({ charged: 42, run: 1 });
    expect(await once(sql, "w1", effect)).toEqual({ charged: 42, run: 1 });
    expect((await sql`SELECT count(*)::int AS n FROM effects WHERE webhook_id = 'w1'`)[0].n).toBe(1);
  });

  test("once: an effect that throws keeps nothing (its writes and the marker roll back); the retry runs it", async () => {
    let runs = 0;
    const effect = async (tx: postgres.TransactionSql) => {
      runs++;
      await tx`INSERT INTO effects VALUES ('w2', ${runs})`;
      if (runs === 1) throw new Error("boom");
      return "ok";
    };
    await expect(once(sql, "w2", effect)).rejects.toThrow("boom");
    expect(await processedStatus(sql, "w2")).toEqual({ processed: false });
    expect(await once(sql, "w2", effect)).toBe("ok");
    expect((await sql`SELECT n FROM effects WHERE webhook_id = 'w2'`).map((r) => r.n)).toEqual([2]);
  });

  test("verify endpoint: 404 processed false before the effect, 200 processed true after; unsigned asks are refused", async () => {
    const verify = verifyHandler({ secrets: SECRET }, sql);
    const ask = (id: string) => verify(new Request("http://r/verify", { headers: signed("", { id }) }));
    const before = await ask("w3");
    expect(before.status).toBe(404);
    expect(await before.json()).toEqual({ processed: false });
    await once(sql, "w3", async () => "done");
    const after = await ask("w3");
    expect(after.status).toBe(200);
    expect(await after.json()).toMatchObject({ processed: true, processed_at: expect.any(String) });
    const unsigned = await verify(new Request("http://r/verify", { headers: { "webhook-id": "w3" } }));
    expect(unsigned.status).toBe(400);
  });

  test("pgFencing keeps the highest token per job across connections", async () => {
    const f = pgFencing(sql);
    expect(await f.observe("j1", 5n)).toBe(true);
    const other = postgres(url, { max: 1 });
    expect(await pgFencing(other).observe("j1", 4n)).toBe(false);
    await other.end();
    expect(await f.observe("j1", 2n ** 40n)).toBe(true);
    expect(await f.observe("j1", 2n ** 40n - 1n)).toBe(false);
  });

  test("Hono: middleware checks and fences, the route uses once, the verify route answers from the markers", async () => {
    const app = new Hono<WebhookEnv>();
    const r = createReceiver({ secrets: [SECRET], fencing: pgFencing(sql) });
    app.post("/hook", honoWebhook(r), async (c) => {
      const call = c.var.webhook;
      const res = await once(sql, call.id, async (tx) => {
        await tx`INSERT INTO effects VALUES (${call.id}, 1)`;
        return { ok: true, id: call.id };
      });
      return c.json(res);
    });
    app.get("/hook/verify", honoVerify(r, sql));
    const id = crypto.randomUUID();
    const call = () => app.request("/hook", { method: "POST", headers: signed('{"x":1}', { id, token: "7" }), body: '{"x":1}' });
    expect((await call()).status).toBe(200);
    expect(await (await call()).json()).toEqual({ ok: true, id });
    expect((await sql`SELECT count(*)::int AS n FROM effects WHERE webhook_id = ${id}`)[0].n).toBe(1);
    const stale = await app.request("/hook", { method: "POST", headers: signed("{}", { id, token: "6" }), body: "{}" });
    expect(stale.status).toBe(409);
    const bad = await app.request("/hook", { method: "POST", headers: { ...signed("{}", { id }), "webhook-signature": "v1,AAAA" }, body: "{}" });
    expect(bad.status).toBe(401);
    const v = await app.request("/hook/verify", { headers: signed("", { id }) });
    expect(v.status).toBe(200);
    expect(((await v.json()) as any).processed).toBe(true);
  });

  test("retention: markers and fencing rows older than the setting are pruned, newer ones kept", async () => {
    await once(sql, "old-1", async () => 1);
    await once(sql, "new-1", async () => 1);
    await sql`UPDATE scheduler_receiver_processed SET processed_at = now() - interval '40 days' WHERE webhook_id = 'old-1'`;
    await pgFencing(sql).observe("old-job", 1n);
    await sql`UPDATE scheduler_receiver_fencing SET seen_at = now() - interval '40 days' WHERE job_id = 'old-job'`;
    const r = await pruneProcessed(sql, { keepMs: 30 * 86_400_000, batch: 1 });
    expect(r).toEqual({ markers: 1, fences: 1 });
    expect((await processedStatus(sql, "old-1")).processed).toBe(false);
    expect((await processedStatus(sql, "new-1")).processed).toBe(true);
  });
});
