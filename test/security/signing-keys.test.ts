// Issue 16, hole 3: signing secrets per tenant (and per schedule), rotated the Standard
// Webhooks way, managed through /v1/signing-keys and audited. Real scheduler, real target,
// verified with the standardwebhooks library; both drivers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target, type Received } from "../helpers/target.ts";
import { bearer, expectError } from "../api/support.ts";
import { tokenSpec } from "../helpers/tokens.ts";

const FALLBACK = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8G";
const TOKENS = tokenSpec("admA:acme:admin;admB:beta:admin;wA:acme:jobs:read,jobs:write;root:*:admin");
const A = bearer("admA");
const B = bearer("admB");
const WA = bearer("wA");
const ROOT = bearer("root");

const verifies = (secret: string, r: Received) => {
  try {
    new Webhook(secret).verify(r.body, r.headers);
    return true;
  } catch {
    return false;
  }
};

for (const driver of DRIVERS) {
  describe(`signing keys per tenant (${driver})`, () => {
    let t: TestDb;
    let rt: Runtime;
    const target = new Target();
    let n = 0;

    beforeAll(async () => {
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_TOKENS: TOKENS, SCHEDULER_SIGNING_SECRET: FALLBACK });
    });
    afterAll(async () => {
      await rt?.stop();
      await t?.close();
      target.stop();
    });

    /** One call of a new job in `tenant` (optionally of a schedule, by its trigger), as the target got it. */
    const call = async (tenant: string, scheduleId?: string): Promise<Received> => {
      const path = `/c${++n}`;
      if (scheduleId) {
        const patch = await api(rt, "PATCH", `/v1/schedules/${scheduleId}?tenant=${tenant}`, { target: { url: `${target.url}${path}`, body: { n } } }, ROOT);
        expect(patch.status).toBe(200);
        const trig = await api(rt, "POST", `/v1/schedules/${scheduleId}/trigger?tenant=${tenant}`, {}, ROOT);
        expect(trig.status).toBe(201);
      } else {
        const r = await api(rt, "POST", "/v1/jobs", { tenant, target: { url: `${target.url}${path}`, body: { n } } }, ROOT);
        expect(r.status).toBe(201);
      }
      return eventually(() => target.callsTo(path)[0], 15_000, `the call to ${path}`);
    };
    /** The worker's keyring has seen the change (NOTIFY; at the latest the refresh interval). */
    const keysSettle = (tenant: string, count: number, scheduleId: string | null = null) =>
      eventually(() => rt.keyring!.keysFor(tenant, scheduleId).length === count, 15_000, `${count} keys for ${tenant}/${scheduleId}`);

    let acme1 = { id: "", secret: "" };
    let acme2 = { id: "", secret: "" };
    let beta1 = { id: "", secret: "" };

    test("POST /v1/signing-keys: 201, the secret once (whsec_, ≥ 24 bytes), then never again", async () => {
      const r = await api(rt, "POST", "/v1/signing-keys", {}, A);
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ tenant: "acme", schedule_id: null, status: "active" });
      expect(r.body.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(Buffer.from(r.body.secret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);
      expect(Date.parse(r.body.created_at)).toBeGreaterThan(0);
      acme1 = { id: r.body.id, secret: r.body.secret };
      const b = await api(rt, "POST", "/v1/signing-keys", { reason: "first key" }, B);
      expect(b.status).toBe(201);
      expect(b.body.tenant).toBe("beta");
      beta1 = { id: b.body.id, secret: b.body.secret };
      expect(beta1.secret).not.toBe(acme1.secret);
      const list = await api(rt, "GET", "/v1/signing-keys", undefined, A);
      expect(list.status).toBe(200);
      expect(list.body.items.map((k: any) => k.id)).toEqual([acme1.id]);
      expect(JSON.stringify(list.body)).not.toContain(acme1.secret.slice(6, 20));
      expect(list.body.items[0].secret).toBeUndefined();
      const all = await api(rt, "GET", "/v1/signing-keys", undefined, ROOT);
      expect(all.body.items.map((k: any) => k.id).sort()).toEqual([acme1.id, beta1.id].sort());
    });

    test("a tenant's call verifies with its own key, not with another tenant's nor the fallback", async () => {
      await keysSettle("acme", 1);
      await keysSettle("beta", 1);
      const a = await call("acme");
      expect(a.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
      expect(verifies(acme1.secret, a)).toBe(true);
      expect(verifies(beta1.secret, a)).toBe(false);
      expect(verifies(FALLBACK, a)).toBe(false);
      const b = await call("beta");
      expect(verifies(beta1.secret, b)).toBe(true);
      expect(verifies(acme1.secret, b)).toBe(false);
    });

    test("a tenant without keys is signed with SCHEDULER_SIGNING_SECRET", async () => {
      const g = await call("gamma");
      expect(verifies(FALLBACK, g)).toBe(true);
      expect(verifies(acme1.secret, g)).toBe(false);
    });

    test("rotation: during the overlap every call carries both signatures, each verifies; a retire removes the old one", async () => {
      const r = await api(rt, "POST", `/v1/signing-keys/${acme1.id}/rotate`, { overlap: "1h", reason: "yearly rotation" }, A);
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ tenant: "acme", schedule_id: null, status: "active", replaces: acme1.id });
      expect(r.body.old).toMatchObject({ id: acme1.id, status: "active" });
      expect(Date.parse(r.body.old.retires_at) - Date.now()).toBeGreaterThan(50 * 60_000);
      acme2 = { id: r.body.id, secret: r.body.secret };
      await keysSettle("acme", 2);
      const both = await call("acme");
      const sigs = both.headers["webhook-signature"]!.split(" ");
      expect(sigs).toHaveLength(2);
      for (const s of sigs) expect(s).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      expect(verifies(acme1.secret, both)).toBe(true);
      expect(verifies(acme2.secret, both)).toBe(true);
      expect(verifies(beta1.secret, both)).toBe(false);

      const ret = await api(rt, "POST", `/v1/signing-keys/${acme1.id}/retire`, { reason: "receivers moved" }, A);
      expect(ret.status).toBe(200);
      expect(ret.body).toMatchObject({ id: acme1.id, status: "retired", retires_at: null });
      expect(typeof ret.body.retired_at).toBe("string");
      // Idempotent.
      const again = await api(rt, "POST", `/v1/signing-keys/${acme1.id}/retire`, {}, A);
      expect(again.status).toBe(200);
      expect(again.body.retired_at).toBe(ret.body.retired_at);
      await keysSettle("acme", 1);
      const after = await call("acme");
      expect(after.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
      expect(verifies(acme2.secret, after)).toBe(true);
      expect(verifies(acme1.secret, after)).toBe(false);
      const active = await api(rt, "GET", "/v1/signing-keys?status=active", undefined, A);
      expect(active.body.items.map((k: any) => k.id)).toEqual([acme2.id]);
      const retired = await api(rt, "GET", "/v1/signing-keys?status=retired", undefined, A);
      expect(retired.body.items.map((k: any) => k.id)).toEqual([acme1.id]);
      // A retired key cannot be rotated.
      expectError(await api(rt, "POST", `/v1/signing-keys/${acme1.id}/rotate`, {}, A), 409);
    });

    test("a rotation's overlap ends on time, without a reload", async () => {
      const r = await api(rt, "POST", `/v1/signing-keys/${beta1.id}/rotate`, { overlap: "1s" }, B);
      expect(r.status).toBe(201);
      await keysSettle("beta", 2);
      const loads = rt.keyring!.loads;
      await keysSettle("beta", 1);
      const b = await call("beta");
      expect(verifies(r.body.secret, b)).toBe(true);
      expect(verifies(beta1.secret, b)).toBe(false);
      // The overlap ended by its instant, not by a reload (the refresh interval is 10 s).
      expect(rt.keyring!.loads - loads).toBeLessThanOrEqual(1);
      beta1 = { id: r.body.id, secret: r.body.secret };
    });

    test("a schedule's keys sign its occurrences; the tenant's other jobs keep the tenant's key", async () => {
      const s = await api(rt, "POST", "/v1/schedules", { id: "nightly", cron: "0 3 1 1 *", timezone: "UTC", target: { url: `${target.url}/x` } }, WA);
      expect(s.status).toBe(201);
      const k = await api(rt, "POST", "/v1/signing-keys", { schedule_id: "nightly" }, A);
      expect(k.status).toBe(201);
      expect(k.body.schedule_id).toBe("nightly");
      await keysSettle("acme", 1, "nightly");
      await eventually(() => rt.keyring!.keysFor("acme", "nightly")[0] !== rt.keyring!.keysFor("acme", null)[0], 15_000, "the schedule's own key");
      const occ = await call("acme", "nightly");
      expect(verifies(k.body.secret, occ)).toBe(true);
      expect(verifies(acme2.secret, occ)).toBe(false);
      const plain = await call("acme");
      expect(verifies(acme2.secret, plain)).toBe(true);
      expect(verifies(k.body.secret, plain)).toBe(false);
      const listed = await api(rt, "GET", "/v1/signing-keys?schedule_id=nightly", undefined, A);
      expect(listed.body.items.map((x: any) => x.id)).toEqual([k.body.id]);
      // Deleting the schedule retires its keys: a new schedule of that id starts without them.
      expect((await api(rt, "DELETE", "/v1/schedules/nightly", undefined, WA)).status).toBe(200);
      const after = await api(rt, "GET", "/v1/signing-keys?schedule_id=nightly", undefined, A);
      expect(after.body.items.map((x: any) => [x.id, x.status])).toEqual([[k.body.id, "retired"]]);
      await eventually(() => rt.keyring!.keysFor("acme", "nightly")[0] === rt.keyring!.keysFor("acme", null)[0], 15_000, "the deleted schedule's key gone");
      const audit = await api(rt, "GET", `/v1/audit?object_id=${k.body.id}`, undefined, ROOT);
      expect(audit.body.items.map((x: any) => x.action).sort()).toEqual(["signing_key.created", "signing_key.retired"]);
    });

    test("validation and scopes: 400 naming the field, 403 for scope or tenant, 404 for unknown or another tenant's key", async () => {
      expectError(await api(rt, "POST", "/v1/signing-keys", { secret: "whsec_mine" }, A), 400, "secret");
      expectError(await api(rt, "POST", "/v1/signing-keys", { tenant: "bad tenant!" }, ROOT), 400, "tenant");
      expectError(await api(rt, "POST", "/v1/signing-keys", { schedule_id: 5 }, A), 400, "schedule_id");
      expectError(await api(rt, "POST", "/v1/signing-keys", { schedule_id: "no-such" }, A), 400, "schedule_id");
      expectError(await api(rt, "POST", "/v1/signing-keys", { reason: 1 }, A), 400, "reason");
      expectError(await api(rt, "POST", "/v1/signing-keys", "[1]", A), 400);
      expectError(await api(rt, "POST", "/v1/signing-keys", "{", A), 400);
      expectError(await api(rt, "POST", "/v1/signing-keys", {}, WA), 403);
      expectError(await api(rt, "GET", "/v1/signing-keys", undefined, WA), 403);
      expectError(await api(rt, "POST", "/v1/signing-keys", { tenant: "beta" }, A), 403, "tenant");
      expectError(await api(rt, "GET", "/v1/signing-keys?tenant=beta", undefined, A), 403, "tenant");
      expectError(await api(rt, "GET", "/v1/signing-keys?status=gone", undefined, A), 400, "status");
      expectError(await api(rt, "GET", "/v1/signing-keys?limit=0", undefined, A), 400, "limit");
      expectError(await api(rt, "POST", `/v1/signing-keys/${acme2.id}/rotate`, { overlap: "forever" }, A), 400, "overlap");
      expectError(await api(rt, "POST", `/v1/signing-keys/${acme2.id}/rotate`, { overlap: "90d" }, A), 400, "overlap");
      expectError(await api(rt, "POST", `/v1/signing-keys/${acme2.id}/retire`, { why: "x" }, A), 400, "why");
      expectError(await api(rt, "POST", "/v1/signing-keys/not-a-uuid/retire", {}, A), 404);
      expectError(await api(rt, "POST", "/v1/signing-keys/0193a0aa-0000-7000-8000-000000000000/retire", {}, A), 404);
      // Another tenant's key: as if it did not exist, and left alone.
      expectError(await api(rt, "POST", `/v1/signing-keys/${beta1.id}/retire`, {}, A), 404);
      expectError(await api(rt, "POST", `/v1/signing-keys/${beta1.id}/rotate`, {}, A), 404);
      const b = await api(rt, "GET", "/v1/signing-keys?status=active", undefined, B);
      expect(b.body.items.map((k: any) => k.id)).toContain(beta1.id);
    });

    test("at most 10 active keys per scope: the 11th is a 409", async () => {
      const live = (await api(rt, "GET", "/v1/signing-keys?status=active&tenant=delta", undefined, ROOT)).body.items.length;
      expect(live).toBe(0);
      for (let i = 0; i < 10; i++) expect((await api(rt, "POST", "/v1/signing-keys", { tenant: "delta" }, ROOT)).status).toBe(201);
      expectError(await api(rt, "POST", "/v1/signing-keys", { tenant: "delta" }, ROOT), 409);
    });

    test("every key change is in the audit log, with who and why, never the secret", async () => {
      const r = await api(rt, "GET", "/v1/audit?action=signing_key.&limit=100", undefined, ROOT);
      expect(r.status).toBe(200);
      const rows = r.body.items as any[];
      const of = (action: string, id: string) => rows.find((x) => x.action === action && x.object_id === id);
      expect(of("signing_key.created", acme1.id)).toMatchObject({ tenant: "acme", actor: expect.stringContaining("token:acme:") });
      expect(of("signing_key.rotated", acme1.id)).toMatchObject({ tenant: "acme", reason: "yearly rotation" });
      expect(of("signing_key.rotated", acme1.id).details.new_key).toBe(acme2.id);
      expect(of("signing_key.retired", acme1.id)).toMatchObject({ tenant: "acme", reason: "receivers moved" });
      // One retired row: the idempotent second retire wrote none.
      expect(rows.filter((x) => x.action === "signing_key.retired" && x.object_id === acme1.id)).toHaveLength(1);
      const text = JSON.stringify(rows);
      for (const s of [acme1.secret, acme2.secret, beta1.secret]) expect(text).not.toContain(s.slice(6, 26));
    });
  });
}
