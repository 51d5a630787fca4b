import { Hono, type Context } from "hono";
import * as v from "valibot";
import type { Db } from "../store/db.ts";
import { getSchedule } from "../store/schedules.ts";
import {
  createSigningKey,
  listSigningKeys,
  retireSigningKey,
  rotateSigningKey,
  secretText,
  SigningKeyLimitError,
  SigningKeyRetiredError,
  type SigningKeyRow,
} from "../store/signing-keys.ts";
import { parseDuration } from "../time/duration.ts";
import { type AppEnv, requireScope, tenantFilter, tenantForCreate } from "./auth.ts";
import { ApiError, badRequest, conflict, notFound } from "./errors.ts";
import { parseOrThrow } from "./job-input.ts";
import { queryInt, readJson, REASON } from "./request.ts";
import { SCHEDULE_ID } from "./schedule-input.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A rotation's overlap, at most: receivers get this long to take up the new secret. */
const MAX_OVERLAP_MS = 30 * 86_400_000;
const DEFAULT_OVERLAP_MS = 86_400_000;

const TENANT = v.pipe(v.string("must be a string"), v.regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1 to 64 letters, digits, _ . or -"));
const OVERLAP = v.pipe(
  v.union([v.string(), v.number()], 'must be a duration like "24h" or whole milliseconds'),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    try {
      return parseDuration(dataset.value);
    } catch {
      addIssue({ message: 'must be a duration like "24h" or whole milliseconds' });
      return NEVER;
    }
  }),
  v.maxValue(MAX_OVERLAP_MS, "must be at most 30d"),
);

// Exported for the OpenAPI document, which documents these very schemas.
export const SigningKeyCreateSchema = v.strictObject({
  tenant: v.optional(TENANT),
  schedule_id: v.optional(v.pipe(v.string("must be a string"), v.regex(SCHEDULE_ID, "must be a schedule id (1 to 128 letters, digits, _ . : or -)"))),
  reason: REASON,
});
export const SigningKeyRotateSchema = v.strictObject({
  /** How long the old key keeps signing alongside the new one (default 24h; "0s": retired at once). */
  overlap: v.optional(OVERLAP),
  reason: REASON,
});
export const SigningKeyRetireSchema = v.strictObject({ reason: REASON });

/** What the API shows of a key: never its secret (but in the answer that created it). */
export function signingKeyView(r: SigningKeyRow) {
  const retired = r.retired_at !== null && r.retired_at.getTime() <= r.now.getTime();
  return {
    id: r.id,
    tenant: r.tenant,
    schedule_id: r.schedule_id,
    created_at: r.created_at.toISOString(),
    status: retired ? ("retired" as const) : ("active" as const),
    // Active with a retirement set (a rotation's overlap): when it stops signing.
    retires_at: !retired && r.retired_at !== null ? r.retired_at.toISOString() : null,
    retired_at: retired ? r.retired_at!.toISOString() : null,
    replaces: r.replaces,
  };
}

/** POST/GET /v1/signing-keys, /:id/rotate, /:id/retire (README "Signing keys per tenant"); admin only. */
export function signingKeysRoutes(deps: { db: Db }) {
  const { db } = deps;
  const app = new Hono<AppEnv>();
  const by = (c: Context<AppEnv>, reason: string | undefined) => {
    c.set("audited", true);
    return { actor: c.get("principal").actor, reason: reason ?? null };
  };
  const idOf = (c: Context<AppEnv>) => {
    const id = c.req.param("id")!;
    if (!UUID.test(id)) throw notFound(`signing key ${id}`);
    return id;
  };

  app.post("/signing-keys", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const body = parseOrThrow(SigningKeyCreateSchema, await readJson(c));
    const tenant = tenantForCreate(p, body.tenant);
    const scheduleId = body.schedule_id ?? null;
    if (scheduleId !== null && !(await getSchedule(db, tenant, scheduleId))) {
      throw badRequest(`schedule_id: tenant ${tenant} has no schedule ${scheduleId}`, "schedule_id");
    }
    try {
      const made = await createSigningKey(db, { tenant, scheduleId }, by(c, body.reason));
      return c.json({ ...signingKeyView(made.row), secret: secretText(made.secret) }, 201);
    } catch (err) {
      if (err instanceof SigningKeyLimitError) throw conflict("too_many_signing_keys", err.message);
      throw err;
    }
  });

  app.get("/signing-keys", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const q = c.req.query();
    const status = q.status ?? null;
    if (status !== null && status !== "active" && status !== "retired") throw badRequest("status must be active or retired", "status");
    if (q.schedule_id !== undefined && !SCHEDULE_ID.test(q.schedule_id)) throw badRequest("schedule_id must be a schedule id", "schedule_id");
    if (q.tenant !== undefined && !v.is(TENANT, q.tenant)) throw badRequest("tenant must be 1 to 64 letters, digits, _ . or -", "tenant");
    const own = tenantFilter(p);
    if (own !== null && q.tenant !== undefined && q.tenant !== own)
      throw new ApiError(403, "forbidden", `this token may not read tenant ${q.tenant}`, "tenant");
    const rows = await listSigningKeys(db, {
      tenant: own ?? q.tenant ?? null,
      scheduleId: q.schedule_id ?? null,
      status,
      limit: queryInt("limit", q.limit, 1, 1000, 100),
    });
    return c.json({ items: rows.map(signingKeyView) });
  });

  app.post("/signing-keys/:id/rotate", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const id = idOf(c);
    const body = parseOrThrow(SigningKeyRotateSchema, await readJson(c));
    try {
      const r = await rotateSigningKey(db, id, tenantFilter(p), body.overlap ?? DEFAULT_OVERLAP_MS, by(c, body.reason));
      if (!r) throw notFound(`signing key ${id}`);
      return c.json({ ...signingKeyView(r.row), secret: secretText(r.secret), old: signingKeyView(r.old) }, 201);
    } catch (err) {
      if (err instanceof SigningKeyLimitError) throw conflict("too_many_signing_keys", err.message);
      if (err instanceof SigningKeyRetiredError) throw conflict("signing_key_retired", err.message);
      throw err;
    }
  });

  app.post("/signing-keys/:id/retire", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const id = idOf(c);
    const body = parseOrThrow(SigningKeyRetireSchema, await readJson(c));
    const row = await retireSigningKey(db, id, tenantFilter(p), by(c, body.reason));
    if (!row) throw notFound(`signing key ${id}`);
    return c.json(signingKeyView(row));
  });

  return app;
}
