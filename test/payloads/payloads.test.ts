import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";
import { expectError } from "../api/support.ts";

const sha = (b: Uint8Array | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** A loopback target that keeps the SHA-256 and size of every body it receives, as raw bytes. */
function hashingTarget() {
  const got: { path: string; hash: string; size: number; type: string | null; signature: string | null; job: string | null }[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    maxRequestBodySize: 64 * 1024 * 1024,
    fetch: async (req) => {
      const bytes = new Uint8Array(await req.arrayBuffer());
      got.push({
        path: new URL(req.url).pathname,
        hash: sha(bytes),
        size: bytes.length,
        type: req.headers.get("content-type"),
        signature: req.headers.get("webhook-signature"),
        job: req.headers.get("webhook-id"),
      });
      return new Response("ok");
    },
  });
  return { got, url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

// ~5 MB with multi-byte characters, so bytes ≠ characters is exercised on the way.
const bigText = () => "ünïcødé €😀 line\n".repeat(5_000_000 / 22) + Math.random();

for (const driver of DRIVERS) {
  describe(`large payloads by reference (${driver})`, () => {
    let tdb: TestDb;
    let rt: Runtime;
    const target = hashingTarget();

    beforeAll(async () => {
      tdb = await freshDb(driver);
      rt = await startScheduler(tdb.db, { SCHEDULER_SIGNING_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" });
    });
    afterAll(async () => {
      await rt?.stop();
      await tdb?.close();
      target.stop();
    });

    const row = async (id: string) =>
      (
        await tdb.db.query<{ target: any; status: string; dead_reason: string | null; last_error: string | null; size: number }>(
          "SELECT target, status, dead_reason, last_error, pg_column_size(target) AS size FROM jobs WHERE id = $1",
          [id],
        )
      )[0];
    const settled = (id: string, status: string) =>
      eventually(async () => ((await row(id))?.status === status ? row(id) : undefined), 20_000, `job ${id} ${status}`);

    test("a 5 MB JSON body and a 5 MB body_text travel by reference and arrive byte-identical", async () => {
      const json = { text: bigText(), n: [1, 2, 3] };
      const text = bigText();
      const a = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/json`, body: json } });
      const b = await api(rt, "POST", "/v1/jobs", {
        target: { url: `${target.url}/text`, body_text: text, headers: { "content-type": "text/plain; charset=utf-8" } },
      });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      const jsonBytes = new TextEncoder().encode(JSON.stringify(json));
      const textBytes = new TextEncoder().encode(text);
      // The write answer and the row carry the reference only.
      expect(a.body.target.body).toBeUndefined();
      expect(a.body.target.body_ref).toBe(sha(jsonBytes));
      expect(a.body.target.body_size).toBe(jsonBytes.length);
      expect(b.body.target.body_ref).toBe(sha(textBytes));
      for (const [id, bytes] of [
        [a.body.id, jsonBytes],
        [b.body.id, textBytes],
      ] as const) {
        const r = await settled(id, "succeeded");
        expect(r.target.body).toBeNull();
        expect(r.target.body_ref).toBe(sha(bytes));
        expect(r.target.body_size).toBe(bytes.length);
        expect(r.size).toBeLessThan(1000);
      }
      const json1 = target.got.find((g) => g.path === "/json")!;
      const text1 = target.got.find((g) => g.path === "/text")!;
      expect(json1.hash).toBe(sha(jsonBytes));
      expect(json1.size).toBe(jsonBytes.length);
      expect(json1.type).toBe("application/json");
      expect(json1.signature).toStartWith("v1,");
      expect(text1.hash).toBe(sha(textBytes));
      expect(text1.type).toBe("text/plain; charset=utf-8");
      // Stored once per content.
      const p = await tdb.db.query<{ hash: string; size: number }>("SELECT hash, size FROM payloads ORDER BY size");
      expect(p.map((x) => x.hash).sort()).toEqual([sha(jsonBytes), sha(textBytes)].sort());

      // GET by id resolves the body; the listing does not load it.
      const one = await api(rt, "GET", `/v1/jobs/${a.body.id}`);
      expect(one.body.target.body).toEqual(json);
      expect(one.body.target.body_ref).toBe(sha(jsonBytes));
      const two = await api(rt, "GET", `/v1/jobs/${b.body.id}`);
      expect(two.body.target.body_text).toBe(text);
      const list = await api(rt, "GET", "/v1/jobs?limit=1000");
      const listed = (list.body.items as any[]).find((j) => j.id === a.body.id);
      expect(listed.target.body).toBeUndefined();
      expect(listed.target.body_size).toBe(jsonBytes.length);
    }, 60_000);

    test("a batch with large bodies, one of them twice: each body stored once, every job reads its own back", async () => {
      const one = "α".repeat(40_000) + Math.random(); // 80 kB in UTF-8: over the 64 KiB inline bound
      const two = "β".repeat(50_000) + Math.random();
      const r = await api(rt, "POST", "/v1/jobs/batch", {
        jobs: [
          { target: { url: `${target.url}/b1`, body_text: one }, delay: "1h" },
          { target: { url: `${target.url}/b2`, body_text: two }, delay: "1h" },
          { target: { url: `${target.url}/b3`, body_text: one }, delay: "1h" },
          { target: { url: `${target.url}/b4`, body: { small: true } }, delay: "1h" },
        ],
      });
      expect(r.status).toBe(200);
      const [a, b, c, d] = r.body.jobs;
      const enc = (t: string) => new TextEncoder().encode(t);
      expect(a.target.body_ref).toBe(sha(enc(one)));
      expect(c.target.body_ref).toBe(sha(enc(one)));
      expect(b.target.body_ref).toBe(sha(enc(two)));
      expect(d.target.body).toEqual({ small: true });
      const stored = await tdb.db.query<{ hash: string; size: number }>("SELECT hash, size FROM payloads WHERE hash = ANY($1::text[]) ORDER BY size", [
        [sha(enc(one)), sha(enc(two))],
      ]);
      expect(stored).toEqual([
        { hash: sha(enc(one)), size: enc(one).length },
        { hash: sha(enc(two)), size: enc(two).length },
      ]);
      for (const [job, text] of [
        [a, one],
        [b, two],
        [c, one],
      ] as const) {
        const got = await api(rt, "GET", `/v1/jobs/${job.id}`);
        expect(got.body.target.body_text).toBe(text);
      }
    });

    test("a small body stays inline", async () => {
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/small`, body: { a: 1 } }, delay: "1h" });
      expect(r.status).toBe(201);
      expect(r.body.target.body).toEqual({ a: 1 });
      expect((await row(r.body.id)).target.body_ref).toBeUndefined();
    });

    test("a request over 10 MiB → 413 in the error shape, nothing created", async () => {
      const before = (await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n;
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/huge`, body_text: "x".repeat(11 * 1024 * 1024) } });
      const err = expectError(r, 413);
      expect(err.code).toBe("payload_too_large");
      expect((await tdb.db.query<{ n: string }>("SELECT count(*) AS n FROM jobs"))[0].n).toBe(before);
    }, 30_000);

    test("a payload missing at execution → dead, payload_missing: <ref>", async () => {
      const text = bigText();
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/missing`, body_text: text }, delay: "1h" });
      expect(r.status).toBe(201);
      const ref = r.body.target.body_ref as string;
      await tdb.db.query("DELETE FROM payloads WHERE hash = $1", [ref]);
      expect((await api(rt, "PATCH", `/v1/jobs/${r.body.id}`, { delay: "0s" })).status).toBe(200);
      const dead = await settled(r.body.id, "dead");
      expect(dead.dead_reason).toBe("payload_missing");
      expect(dead.last_error).toBe(`payload_missing: ${ref}`);
      expect(target.got.some((g) => g.path === "/missing")).toBe(false);
    }, 30_000);

    test("a schedule's large body is stored once; its occurrences carry the reference and deliver it", async () => {
      const text = bigText();
      const bytes = new TextEncoder().encode(text);
      const s = await api(rt, "POST", "/v1/schedules", { id: "big", cron: "* * * * * *", target: { url: `${target.url}/sched`, body_text: text } });
      expect(s.status).toBe(201);
      expect(s.body.target.body_ref).toBe(sha(bytes));
      // Two occurrences, not two calls: on a starved machine two calls came from one occurrence
      // (a retry: at least once, as designed) and the check of two rows below failed.
      const occurrencesCalled = () => new Set(target.got.filter((g) => g.path === "/sched").map((g) => g.job)).size;
      await eventually(() => occurrencesCalled() >= 2, 15_000, "two occurrences delivered");
      expect((await api(rt, "DELETE", "/v1/schedules/big")).status).toBe(200);
      for (const g of target.got.filter((x) => x.path === "/sched")) expect(g.hash).toBe(sha(bytes));
      const occ = await tdb.db.query<{ target: any }>("SELECT target FROM jobs WHERE schedule_id = 'big'");
      expect(occ.length).toBeGreaterThanOrEqual(2);
      for (const o of occ) {
        expect(o.target.body).toBeNull();
        expect(o.target.body_ref).toBe(sha(bytes));
      }
      expect((await tdb.db.query("SELECT 1 FROM payloads WHERE hash = $1", [sha(bytes)])).length).toBe(1);
    }, 60_000);
  });
}
