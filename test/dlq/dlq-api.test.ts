// GET /v1/dlq, replay refusals, dry runs, bounded bulk replays and the audit log, through a real
// API process (mode api: nothing is dispatched, so replayed jobs stay where the replay put them).
import { tok, tokenSpec } from "../helpers/tokens.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { insertJob } from "../helpers/jobs.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import { bearer, expectError } from "../api/support.ts";
import { auditRows, insertDead, row } from "./support.ts";

const TOKENS = tokenSpec("adm:acme:admin;admB:beta:admin;rd:acme:jobs:read;wr:acme:jobs:read,jobs:write;root:*:admin");
const ADM = bearer("adm");
const ADMB = bearer("admB");
const RD = bearer("rd");
const WR = bearer("wr");
const ROOT = bearer("root");
const actorOf = (token: string, tenant: string) => `token:${tenant}:${createHash("sha256").update(tok(token)).digest("hex").slice(0, 12)}`;

for (const driver of DRIVERS) {
  describe(`dead-letter API (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    let strict: Runtime;

    beforeAll(async () => {
      t = await freshDb(driver);
      const env = { SCHEDULER_TOKENS: TOKENS, REGION: "iad", HOME_REGION: "iad", SCHEDULER_CATCHUP_RATE: "20" };
      rt = await startScheduler(t.db, env, { mode: "api" });
      strict = await startScheduler(t.db, { ...env, SCHEDULER_ALLOW_PRIVATE_TARGETS: "0" }, { mode: "api" });
    });
    afterAll(async () => {
      await Promise.all([rt?.stop(), strict?.stop()]);
      await t?.close();
    });

    /** Every item of GET path (with a ?), page by page. */
    const pageAll = async (path: string, h: Record<string, string>, limit: number) => {
      const items: any[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 50; i++) {
        const r = await api(rt, "GET", `${path}&limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`, undefined, h);
        expect(r.status).toBe(200);
        expect(r.body.items.length).toBeLessThanOrEqual(limit);
        items.push(...r.body.items);
        cursor = r.body.next_cursor;
        if (!cursor) return items;
      }
      throw new Error("pagination did not end");
    };

    test("GET /v1/dlq: the tenant's dead jobs, oldest death first, with reason, dead_at, attempts, replays, quarantined; cursor pages; filters", async () => {
      const base = Date.now() - 100_000;
      const acme: string[] = [];
      for (let i = 0; i < 6; i++) {
        // Two die in the same microsecond: the id breaks the tie, no row is repeated or lost.
        const at = new Date(base + (i === 3 ? 2 : i) * 1000);
        const d = i === 4 ? { reason: "max_attempts", signature: "max_attempts:500" } : i === 5 ? { streak: 4, replays: 3 } : {};
        acme.push(await insertDead(t.db, { tenant: "acme", schedule_id: i === 1 ? "nightly" : null }, { at, ...d }));
      }
      for (let i = 0; i < 2; i++) await insertDead(t.db, { tenant: "beta" }, { at: new Date(base + i * 1000) });
      await insertJob(t.db, { tenant: "acme" }); // scheduled, not dead

      const orderOf = (await t.db.query<{ id: string }>("SELECT id FROM jobs WHERE tenant = 'acme' AND status = 'dead' ORDER BY finished_at, id")).map(
        (r) => r.id,
      );
      expect([...orderOf].sort()).toEqual([...acme].sort());
      for (const h of [RD, ADM]) {
        const items = await pageAll("/v1/dlq?", h, 2);
        expect(items.map((j) => j.id)).toEqual(orderOf);
      }
      const items = await pageAll("/v1/dlq?", RD, 100);
      const first = items.find((j) => j.id === acme[0])!;
      expect(first).toMatchObject({
        tenant: "acme",
        status: "dead",
        reason: "permanent",
        attempts: 1,
        replays: 0,
        quarantined: false,
        failure_signature: "permanent:400",
        same_failure_count: 1,
      });
      expect(first.dead_at).toBe(new Date(base).toISOString());
      expect(first.target.url).toBe("https://example.com/hook");
      expect(items.find((j) => j.id === acme[5])).toMatchObject({ quarantined: true, replays: 3, same_failure_count: 4 });

      // A token of every tenant sees both, and may narrow to one.
      expect((await pageAll("/v1/dlq?tenant=beta", ROOT, 1)).length).toBe(2);
      expect((await pageAll("/v1/dlq?", ROOT, 3)).length).toBe(8);
      // A tenant token's tenant filter cannot widen what it sees.
      expect((await pageAll("/v1/dlq?tenant=beta", RD, 10)).map((j) => j.tenant)).toEqual(Array(6).fill("acme"));

      const ids = async (q: string) => (await pageAll(`/v1/dlq?${q}`, RD, 100)).map((j) => j.id).sort();
      expect(await ids("reason=max_attempts")).toEqual([acme[4]]);
      expect(await ids("reason=permanent:4")).toEqual([acme[0], acme[1], acme[2], acme[3], acme[5]].sort());
      expect(await ids("schedule_id=nightly")).toEqual([acme[1]]);
      expect(await ids("quarantined=true")).toEqual([acme[5]]);
      expect(await ids(`dead_after=${new Date(base + 2000).toISOString()}&dead_before=${new Date(base + 4000).toISOString()}`)).toEqual(
        [acme[2], acme[3]].sort(),
      );
      expectError(await api(rt, "GET", "/v1/dlq?cursor=bm9wZQ", undefined, RD), 400, "cursor");
      expectError(await api(rt, "GET", "/v1/dlq?quarantined=yes", undefined, RD), 400, "quarantined");
      expectError(await api(rt, "GET", "/v1/dlq?dead_after=yesterday", undefined, RD), 400, "dead_after");
    });

    test("tenancy and scopes: another tenant's entry is 404, non-admin replay and audit are 403, a job that is not dead is 409", async () => {
      const dead = await insertDead(t.db, { tenant: "acme" });
      const live = (await insertJob(t.db, { tenant: "acme" })).id;
      const body = { reason: "fixed the endpoint" };
      expectError(await api(rt, "POST", `/v1/dlq/${dead}/replay`, body, ADMB), 404);
      expectError(await api(rt, "POST", `/v1/dlq/${Bun.randomUUIDv7()}/replay`, body, ADM), 404);
      expectError(await api(rt, "POST", `/v1/dlq/not-a-uuid/replay`, body, ADM), 404);
      expect((await pageAll("/v1/dlq?", ADMB, 100)).some((j) => j.id === dead)).toBe(false);
      for (const h of [RD, WR]) {
        expect(expectError(await api(rt, "POST", `/v1/dlq/${dead}/replay`, body, h), 403).code).toBe("forbidden");
        expectError(await api(rt, "POST", "/v1/dlq/replay", { ...body, filter: {} }, h), 403);
        expectError(await api(rt, "GET", "/v1/audit", undefined, h), 403);
      }
      expectError(await api(rt, "GET", "/v1/dlq", undefined, {}), 401);
      expect(expectError(await api(rt, "POST", `/v1/dlq/${live}/replay`, body, ADM), 409).code).toBe("not_dead");
      expectError(await api(rt, "POST", `/v1/dlq/${dead}/replay`, {}, ADM), 400, "reason");
      expectError(await api(rt, "POST", `/v1/dlq/${dead}/replay`, { reason: "x", extra: 1 }, ADM), 400, "extra");
      expect((await row(t.db, dead)).status).toBe("dead");

      const before = await row(t.db, dead);
      const r = await api(rt, "POST", `/v1/dlq/${dead}/replay`, body, ADM);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ id: dead, status: "scheduled", version: before.version + 1, replays: 1, attempts: 1, dead_reason: null });
      const after = await row(t.db, dead);
      expect(after).toMatchObject({
        status: "scheduled",
        tries: 0,
        calls: 1,
        replay: true,
        catchup: false,
        replays: 1,
        dead_signature: "permanent:400",
        dead_streak: 1,
        finished_at: null,
      });
      expect(Math.abs(after.due_at.getTime() - Date.now())).toBeLessThan(5000);
      // Replayed: no longer in the DLQ, and a second replay is refused.
      expect((await pageAll("/v1/dlq?", ADM, 100)).some((j) => j.id === dead)).toBe(false);
      expect(expectError(await api(rt, "POST", `/v1/dlq/${dead}/replay`, body, ADM), 409).code).toBe("not_dead");
      const audit = await auditRows(t.db, "action = 'dlq.replayed' AND object_id = $1", [dead]);
      expect(audit.length).toBe(1);
      expect(audit[0]).toMatchObject({ actor: actorOf("adm", "acme"), tenant: "acme", reason: "fixed the endpoint" });
      expect(audit[0].details).toMatchObject({
        mode: "single",
        force: false,
        replays: 1,
        previous: { dead_reason: "permanent", failure_signature: "permanent:400", quarantined: false },
      });
    });

    test("not replayable: unknown schema version, missing payload, expired, refused target → 422 naming why; quarantined → 409 unless force", async () => {
      const h = ROOT;
      const body = { reason: "retry" };
      const schema = await insertDead(t.db, { tenant: "t-check" }, { schemaVersion: 2 });
      const payload = await insertDead(t.db, { tenant: "t-check" });
      await t.db.query(`UPDATE jobs SET target = '{"method":"POST"}'::jsonb WHERE id = $1`, [payload]);
      const expired = await insertDead(t.db, { tenant: "t-check", expires_at: new Date(Date.now() - 1000) });
      const loopback = await insertDead(t.db, {
        tenant: "t-check",
        target: { url: "http://127.0.0.1:9/x", method: "POST", headers: {}, body: null, json: false },
      });
      const poison = await insertDead(t.db, { tenant: "t-check" }, { streak: 4, replays: 3 });

      const code = async (rtx: Runtime, id: string, status: number, b: object = body) => {
        const r = await api(rtx, "POST", `/v1/dlq/${id}/replay`, b, h);
        return expectError(r, status).code;
      };
      expect(await code(rt, schema, 422)).toBe("schema_version_unsupported");
      expect(await code(rt, payload, 422)).toBe("payload_missing");
      expect(await code(rt, expired, 422)).toBe("expired");
      expect(await code(strict, loopback, 422)).toBe("target_refused");
      expect(await code(rt, poison, 409)).toBe("quarantined");
      // force overrides quarantine only.
      expect(await code(rt, schema, 422, { ...body, force: true })).toBe("schema_version_unsupported");
      for (const id of [schema, payload, expired, loopback, poison]) expect((await row(t.db, id)).status).toBe("dead");
      // With SCHEDULER_ALLOW_PRIVATE_TARGETS=1 the loopback target is allowed.
      expect((await api(rt, "POST", `/v1/dlq/${loopback}/replay`, body, h)).status).toBe(200);
      const forced = await api(rt, "POST", `/v1/dlq/${poison}/replay`, { ...body, force: true }, h);
      expect(forced.status).toBe(200);
      expect(forced.body).toMatchObject({ id: poison, status: "scheduled", replays: 4 });
      const [a] = await auditRows(t.db, "action = 'dlq.replayed' AND object_id = $1", [poison]);
      expect(a.details).toMatchObject({ force: true, previous: { quarantined: true } });
    });

    test("a dry run changes nothing and answers what it would replay and what it would skip, and why", async () => {
      const ids = [
        await insertDead(t.db, { tenant: "t-dry" }, { at: new Date(Date.now() - 4000) }),
        await insertDead(t.db, { tenant: "t-dry" }, { at: new Date(Date.now() - 3000), streak: 4, replays: 3 }),
        await insertDead(t.db, { tenant: "t-dry" }, { at: new Date(Date.now() - 2000), schemaVersion: 7 }),
        await insertDead(t.db, { tenant: "t-dry" }, { at: new Date(Date.now() - 1000) }),
      ];
      const snapshot = async () =>
        JSON.stringify({
          jobs: await t.db.query("SELECT * FROM jobs WHERE tenant = 't-dry' ORDER BY id"),
          audit: await t.db.query("SELECT count(*)::int AS n FROM audit_log WHERE action LIKE 'dlq.%'"),
          pace: await t.db.query("SELECT * FROM dlq_replay_pace"),
        });
      const before = await snapshot();
      const r = await api(rt, "POST", "/v1/dlq/replay", { filter: { tenant: "t-dry" }, rate_per_sec: 1000, dry_run: true }, ROOT);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ dry_run: true, count: 2, job_ids: [ids[0], ids[3]], rate_per_sec: 20, truncated: false, next_cursor: null });
      expect(r.body.skipped.map((s: any) => [s.id, s.code])).toEqual([
        [ids[1], "quarantined"],
        [ids[2], "schema_version_unsupported"],
      ]);
      expect(r.body.skipped[0].message).toContain("force");
      // Capped by SCHEDULER_CATCHUP_RATE=20: 50 ms apart.
      expect(new Date(r.body.last_due_at).getTime() - new Date(r.body.first_due_at).getTime()).toBe(50);
      const forced = await api(rt, "POST", "/v1/dlq/replay", { filter: { tenant: "t-dry" }, rate_per_sec: 5, dry_run: true, force: true }, ROOT);
      expect(forced.body).toMatchObject({ count: 3, job_ids: [ids[0], ids[1], ids[3]], rate_per_sec: 5 });
      expect(await snapshot()).toBe(before);
      // Audited as an admin request (it changed nothing, so nothing more).
      const reqs = await auditRows(t.db, "action = 'admin.request' AND details->>'path' = '/v1/dlq/replay'");
      expect(reqs.length).toBeGreaterThanOrEqual(2);
      expect(reqs.at(-1)!.details).toMatchObject({ method: "POST", status: 200 });
      // A real bulk replay needs a reason.
      expectError(await api(rt, "POST", "/v1/dlq/replay", { filter: { tenant: "t-dry" } }, ROOT), 400, "reason");
      expectError(await api(rt, "POST", "/v1/dlq/replay", { filter: { tenant: "t-dry", colour: "red" }, dry_run: true }, ROOT), 400, "filter.colour");
      expectError(await api(rt, "POST", "/v1/dlq/replay", { reason: "x", limit: 1001 }, ROOT), 400, "limit");
    });

    test("bulk replay is bounded per call (next_cursor goes on) and paced: due_at rate_per_sec apart, across calls", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await insertDead(t.db, { tenant: "t-bulk" }, { at: new Date(Date.now() - 10_000 + i * 100) }));
      const seen: string[] = [];
      let cursor: string | undefined;
      const counts: number[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await api(
          rt,
          "POST",
          "/v1/dlq/replay",
          { filter: { tenant: "t-bulk" }, rate_per_sec: 2, limit: 2, reason: "downstream is back", ...(cursor ? { cursor } : {}) },
          ROOT,
        );
        expect(r.status).toBe(200);
        counts.push(r.body.count);
        seen.push(...r.body.job_ids);
        expect(r.body.truncated).toBe(r.body.next_cursor !== null);
        cursor = r.body.next_cursor ?? undefined;
        if (!cursor) break;
      }
      expect(counts).toEqual([2, 2, 1]);
      expect(seen).toEqual(ids);
      const rows = await t.db.query<{ id: string; due_at: Date; scheduled_for: Date; status: string; replay: boolean }>(
        "SELECT id, due_at, scheduled_for, status, replay FROM jobs WHERE tenant = 't-bulk' ORDER BY due_at",
      );
      expect(rows.map((r) => r.id)).toEqual(ids);
      for (const r of rows) expect(r).toMatchObject({ status: "scheduled", replay: true });
      // 500 ms apart, including across the three calls (the pace is kept in the database).
      const gaps = rows.slice(1).map((r, i) => r.due_at.getTime() - rows[i].due_at.getTime());
      for (const g of gaps) {
        expect(g).toBeGreaterThanOrEqual(499);
        expect(g).toBeLessThanOrEqual(501);
      }
      expect(await auditRows(t.db, "action = 'dlq.replayed' AND tenant = 't-bulk'")).toHaveLength(5);
      const summaries = await auditRows(t.db, "action = 'dlq.bulk_replayed' AND actor = $1", [actorOf("root", "*")]);
      expect(summaries.map((s) => s.details.count)).toEqual([2, 2, 1]);
      expect(summaries[0]).toMatchObject({ reason: "downstream is back", tenant: null });
      expect(summaries[0].details).toMatchObject({ filter: { tenant: "t-bulk" }, rate_per_sec: 2, truncated: true });
      // The route wrote its own rows: no generic admin.request row for these calls.
      expect(
        await auditRows(t.db, "action = 'admin.request' AND details->>'path' = '/v1/dlq/replay' AND (details->>'status')::int = 200 AND id > $1", [
          summaries[0].id,
        ]),
      ).toHaveLength(0);
    });

    test("audit log: replay, cancel, failover and admin-scope requests are written once each, with who and why; newest first, paged; a tenant admin sees its tenant only", async () => {
      const mark = Number((await t.db.query<{ m: string }>("SELECT coalesce(max(id), 0) AS m FROM audit_log"))[0].m);
      const dead = await insertDead(t.db, { tenant: "acme" });
      const j1 = (await insertJob(t.db, { tenant: "acme", due_at: new Date(Date.now() + 3600_000) })).id;
      const j2 = (await insertJob(t.db, { tenant: "acme", due_at: new Date(Date.now() + 3600_000) })).id;

      expect((await api(rt, "POST", `/v1/dlq/${dead}/replay`, { reason: "bug fixed" }, ADM)).status).toBe(200);
      // jobs:write cancels (no admin scope used), then the admin token standing in for jobs:write.
      expect((await api(rt, "POST", `/v1/jobs/${j1}/cancel`, { reason: "not needed" }, WR)).status).toBe(200);
      expect((await api(rt, "POST", `/v1/jobs/${j2}/cancel`, { reason: "duplicate" }, ADM)).status).toBe(200);
      // Reads through the admin scope, and a refused admin request.
      expect((await api(rt, "GET", "/v1/dlq?limit=1", undefined, ADM)).status).toBe(200);
      expect((await api(rt, "GET", "/v1/dlq?limit=1", undefined, RD)).status).toBe(200);
      expect((await api(rt, "POST", `/v1/dlq/${Bun.randomUUIDv7()}/replay`, { reason: "?" }, ADM)).status).toBe(404);
      // Region failover and back (served in any region).
      expect((await api(rt, "POST", "/v1/cluster/failover", { to: "b", reason: "drill", force: true }, ROOT)).status).toBe(200);
      expect((await api(rt, "POST", "/v1/cluster/failover", { to: "iad", reason: "drill over", force: true }, ROOT)).status).toBe(200);

      const rows = await auditRows(t.db, "id > $1", [mark]);
      const of = (action: string, objectId?: string) => rows.filter((r) => r.action === action && (objectId === undefined || r.object_id === objectId));
      expect(of("dlq.replayed", dead)).toHaveLength(1);
      expect(of("job.cancelled", j1)).toEqual([expect.objectContaining({ actor: actorOf("wr", "acme"), reason: "not needed", tenant: "acme" })]);
      expect(of("job.cancelled", j2)).toEqual([expect.objectContaining({ actor: actorOf("adm", "acme"), reason: "duplicate" })]);
      expect(of("cluster.failover").map((r) => [r.actor, r.reason])).toEqual([
        [actorOf("root", "*"), "drill"],
        [actorOf("root", "*"), "drill over"],
      ]);
      const reqs = of("admin.request").map((r) => [r.actor, r.details.method, r.details.path, r.details.status]);
      // One row for the admin read and one for the refused replay; none for the requests that
      // wrote their own row (replay, cancel, failover) and none for the plain jobs:read/jobs:write ones.
      expect(reqs).toEqual([
        [actorOf("adm", "acme"), "GET", "/v1/dlq", 200],
        [actorOf("adm", "acme"), "POST", expect.stringMatching(/^\/v1\/dlq\/.+\/replay$/), 404],
      ]);
      // Tokens are named by tenant and a hash prefix (hex), never by the token itself.
      for (const r of rows) expect(r.actor).toMatch(/^token:[^:]+:[0-9a-f]{12}$/);

      // Newest first, paged; the union of the pages is the log as it was at the first page.
      const first = await api(rt, "GET", "/v1/audit?limit=3", undefined, ROOT);
      expect(first.status).toBe(200);
      const top = first.body.items[0].id;
      const all = [...first.body.items];
      let cursor = first.body.next_cursor;
      while (cursor) {
        const r = await api(rt, "GET", `/v1/audit?limit=3&cursor=${cursor}`, undefined, ROOT);
        expect(r.status).toBe(200);
        all.push(...r.body.items);
        cursor = r.body.next_cursor;
      }
      const ids = all.map((a) => a.id);
      for (let i = 1; i < ids.length; i++) expect(ids[i]).toBeLessThan(ids[i - 1]);
      const inDb = (await t.db.query<{ id: string }>("SELECT id FROM audit_log WHERE id <= $1 ORDER BY id DESC", [top])).map((r) => Number(r.id));
      expect(ids).toEqual(inDb);
      expect(all.find((a) => a.action === "dlq.replayed" && a.object_id === dead)).toMatchObject({
        actor: actorOf("adm", "acme"),
        tenant: "acme",
        reason: "bug fixed",
      });
      expect(typeof all[0].at).toBe("string");

      const mine = await api(rt, "GET", "/v1/audit?limit=1000", undefined, ADM);
      expect(mine.status).toBe(200);
      expect(mine.body.items.length).toBeGreaterThan(0);
      expect(new Set(mine.body.items.map((a: any) => a.tenant))).toEqual(new Set(["acme"]));
      const filtered = await api(rt, "GET", `/v1/audit?action=dlq.&object_id=${dead}`, undefined, ROOT);
      expect(filtered.body.items.map((a: any) => a.action)).toEqual(["dlq.replayed"]);
      expectError(await api(rt, "GET", "/v1/audit?cursor=x-y", undefined, ROOT), 400, "cursor");
    });
  });
}
