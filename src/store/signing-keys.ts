import { randomBytes } from "node:crypto";
import type { Db, Queryable } from "./db.ts";
import { insertAuditBatch } from "./audit.ts";
import { insertAudit } from "./jobs.ts";
import { sql } from "./sql.ts";

/** A signing key as the API shows it: never its secret. */
export interface SigningKeyRow {
  id: string;
  tenant: string;
  schedule_id: string | null;
  created_at: Date;
  /** Null: active. Past: retired. Future: active until then (a rotation's overlap). */
  retired_at: Date | null;
  /** The key this one was rotated in for. */
  replaces: string | null;
  /** The database's now() when read: whether retired_at has passed. */
  now: Date;
}

/** A live key as a worker holds it. */
export interface LiveSigningKey {
  id: string;
  tenant: string;
  schedule_id: string | null;
  secret: Uint8Array;
  /** ms since the epoch; null: no retirement set. */
  retiresAt: number | null;
}

/** Key bytes per new secret: above the 24 the signing-keys contract requires (README "Signing keys per tenant"). */
export const SECRET_BYTES = 32;
/** Active keys per scope (a tenant, or one schedule) at most: each costs an HMAC and ~50 header bytes per call. */
export const MAX_LIVE_KEYS = 10;

export class SigningKeyLimitError extends Error {
  override readonly name = "SigningKeyLimitError";
}
export class SigningKeyRetiredError extends Error {
  override readonly name = "SigningKeyRetiredError";
}

export interface Actor {
  actor: string;
  reason: string | null;
}

export const secretText = (key: Uint8Array) => `whsec_${Buffer.from(key).toString("base64")}`;

async function insertKey(
  q: Queryable,
  scope: { tenant: string; scheduleId: string | null },
  replaces: string | null,
): Promise<{ row: SigningKeyRow; secret: Uint8Array }> {
  const n = Number((await q.query<{ n: string }>(sql("CountLiveSigningKeys"), [scope.tenant, scope.scheduleId]))[0]!.n);
  if (n >= MAX_LIVE_KEYS) {
    throw new SigningKeyLimitError(
      `${scope.scheduleId === null ? `tenant ${scope.tenant}` : `schedule ${scope.scheduleId}`} has ${n} active signing keys already, the most allowed (${MAX_LIVE_KEYS}); retire one first`,
    );
  }
  const secret = new Uint8Array(randomBytes(SECRET_BYTES));
  const row = (
    await q.query<SigningKeyRow>(sql("InsertSigningKey"), [Bun.randomUUIDv7(), scope.tenant, scope.scheduleId, Buffer.from(secret).toString("hex"), replaces])
  )[0]!;
  return { row, secret };
}

/** A new active key; its secret is returned here and never again. */
export async function createSigningKey(
  db: Db,
  scope: { tenant: string; scheduleId: string | null },
  by: Actor,
): Promise<{ row: SigningKeyRow; secret: Uint8Array }> {
  return db.tx(async (q) => {
    const made = await insertKey(q, scope, null);
    await insertAudit(q, {
      actor: by.actor,
      tenant: scope.tenant,
      action: "signing_key.created",
      objectId: made.row.id,
      reason: by.reason,
      details: { schedule_id: scope.scheduleId },
    });
    await q.query(sql("NotifySigningKeys"));
    return made;
  });
}

/**
 * A new key in the scope of key `id`, which stays active for `overlapMs` more (0: retired
 * now): during the overlap every call carries both signatures, so receivers can switch to
 * the new secret at their pace. undefined: no such key (in this tenant).
 */
export async function rotateSigningKey(
  db: Db,
  id: string,
  tenant: string | null,
  overlapMs: number,
  by: Actor,
): Promise<{ row: SigningKeyRow; secret: Uint8Array; old: SigningKeyRow } | undefined> {
  return db.tx(async (q) => {
    const old = (await q.query<SigningKeyRow>(sql("GetSigningKeyForUpdate"), [id, tenant]))[0];
    if (!old) return undefined;
    if (old.retired_at !== null && old.retired_at.getTime() <= old.now.getTime())
      throw new SigningKeyRetiredError(`signing key ${id} is retired; create a new key instead`);
    const made = await insertKey(q, { tenant: old.tenant, scheduleId: old.schedule_id }, old.id);
    const retired = (await q.query<SigningKeyRow>(sql("RetireSigningKeyAt"), [old.id, overlapMs / 1000]))[0]!;
    await insertAudit(q, {
      actor: by.actor,
      tenant: old.tenant,
      action: "signing_key.rotated",
      objectId: old.id,
      reason: by.reason,
      details: { new_key: made.row.id, schedule_id: old.schedule_id, old_retires_at: retired.retired_at?.toISOString() ?? null },
    });
    await q.query(sql("NotifySigningKeys"));
    return { ...made, old: retired };
  });
}

/** Retires key `id` now (idempotent: a retired key stays as it was). undefined: no such key. */
export async function retireSigningKey(db: Db, id: string, tenant: string | null, by: Actor): Promise<SigningKeyRow | undefined> {
  return db.tx(async (q) => {
    const old = (await q.query<SigningKeyRow>(sql("GetSigningKeyForUpdate"), [id, tenant]))[0];
    if (!old) return undefined;
    if (old.retired_at !== null && old.retired_at.getTime() <= old.now.getTime()) return old;
    const row = (await q.query<SigningKeyRow>(sql("RetireSigningKeyAt"), [id, 0]))[0]!;
    await insertAudit(q, {
      actor: by.actor,
      tenant: row.tenant,
      action: "signing_key.retired",
      objectId: row.id,
      reason: by.reason,
      details: { schedule_id: row.schedule_id },
    });
    await q.query(sql("NotifySigningKeys"));
    return row;
  });
}

export interface SigningKeyFilter {
  tenant: string | null;
  scheduleId: string | null;
  status: "active" | "retired" | null;
  limit: number;
}

export async function listSigningKeys(db: Queryable, f: SigningKeyFilter): Promise<SigningKeyRow[]> {
  return db.query<SigningKeyRow>(sql("ListSigningKeys"), [f.tenant, f.scheduleId, f.status, f.limit]);
}

/** Every key not yet retired, with its secret: for workers' in-memory keyrings. */
export async function liveSigningKeys(db: Queryable): Promise<LiveSigningKey[]> {
  const rows = await db.query<{ id: string; tenant: string; schedule_id: string | null; secret_hex: string; retired_at: Date | null }>(sql("LiveSigningKeys"));
  return rows.map((r) => ({
    id: r.id,
    tenant: r.tenant,
    schedule_id: r.schedule_id,
    secret: new Uint8Array(Buffer.from(r.secret_hex, "hex")),
    retiresAt: r.retired_at?.getTime() ?? null,
  }));
}

/** Retires the live keys of a schedule being deleted (in its transaction), audited; how many. */
export async function retireScheduleKeys(q: Queryable, tenant: string, scheduleId: string, by: Actor): Promise<number> {
  const rows = await q.query<{ id: string }>(sql("RetireScheduleSigningKeys"), [tenant, scheduleId]);
  if (rows.length === 0) return 0;
  await insertAuditBatch(
    q,
    rows.map((r) => ({
      actor: by.actor,
      tenant,
      action: "signing_key.retired",
      objectId: r.id,
      reason: by.reason ?? "its schedule was deleted",
      details: { schedule_id: scheduleId, schedule_deleted: true },
    })),
  );
  await q.query(sql("NotifySigningKeys"));
  return rows.length;
}
