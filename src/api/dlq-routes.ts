import { Hono } from "hono";
import * as v from "valibot";
import { listDead } from "../store/dlq.ts";
import { type AppEnv, requireScope, tenantFilter } from "./auth.ts";
import { badRequest, notFound } from "./errors.ts";
import { decodeDeadCursor, DeadFilterSchema, deadFilterFromQuery, encodeDeadCursor, toDeadFilter } from "./dlq-filter.ts";
import { MAX_BULK, replayBulk, replayOne, type ReplayDeps } from "./dlq-replay.ts";
import { deadView } from "./dlq-view.ts";
import { jobView } from "./job-view.ts";
import { parseOrThrow } from "./job-input.ts";
import { queryInt, readJson } from "./request.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Why: a replay is a production action; the audit log keeps it.
const WHY = v.pipe(v.string("must be a string"), v.trim(), v.minLength(1, "must say why"), v.maxLength(1000, "must be at most 1000 characters"));

export const ReplayOneSchema = v.strictObject({ reason: WHY, force: v.optional(v.boolean("must be true or false"), false) });
export const BulkReplaySchema = v.strictObject({
  filter: v.optional(DeadFilterSchema, {}),
  rate_per_sec: v.optional(v.pipe(v.number("must be a number"), v.minValue(0.001, "must be above 0"), v.maxValue(1_000_000, "must be at most 1000000"))),
  reason: v.optional(WHY),
  dry_run: v.optional(v.boolean("must be true or false"), false),
  force: v.optional(v.boolean("must be true or false"), false),
  limit: v.optional(
    v.pipe(
      v.number("must be a number"),
      v.integer("must be a whole number"),
      v.minValue(1, "must be at least 1"),
      v.maxValue(MAX_BULK, `must be at most ${MAX_BULK}`),
    ),
    MAX_BULK,
  ),
  cursor: v.optional(v.string("must be a string")),
});

/** GET /v1/dlq, POST /v1/dlq/:id/replay, POST /v1/dlq/replay (README "Dead letters and replay" and "Audit log"). */
export function dlqRoutes(d: ReplayDeps) {
  const app = new Hono<AppEnv>();

  app.get("/dlq", async (c) => {
    const p = c.get("principal");
    requireScope(p, "jobs:read");
    const q = c.req.query();
    const limit = queryInt("limit", q.limit, 1, 1000, 100);
    const filter = toDeadFilter(deadFilterFromQuery(q), p);
    const rows = await listDead(d.db, filter, d.config.dlqQuarantineAfter, decodeDeadCursor(q.cursor), limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return c.json({
      items: page.map((j) => deadView(j, d.config.dlqQuarantineAfter)),
      next_cursor: rows.length > limit && last ? encodeDeadCursor({ deadKey: last.dead_key, id: last.id }) : null,
    });
  });

  app.post("/dlq/:id/replay", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const id = c.req.param("id");
    const body = parseOrThrow(ReplayOneSchema, await readJson(c));
    if (!UUID.test(id)) throw notFound(`job ${id}`);
    c.set("audited", true);
    const row = await replayOne(d, id, tenantFilter(p), body.force, { actor: p.actor, reason: body.reason });
    return c.json(jobView(row));
  });

  app.post("/dlq/replay", async (c) => {
    const p = c.get("principal");
    requireScope(p, "admin");
    const body = parseOrThrow(BulkReplaySchema, await readJson(c));
    if (!body.dry_run && body.reason === undefined) throw badRequest("reason is required (why these jobs are replayed; kept in the audit log)", "reason");
    // A dry run changes nothing: the generic admin.request row records it.
    if (!body.dry_run) c.set("audited", true);
    const r = await replayBulk(d, {
      filter: toDeadFilter(body.filter, p),
      filterInput: body.filter,
      after: decodeDeadCursor(body.cursor),
      limit: body.limit,
      ratePerSec: body.rate_per_sec,
      dryRun: body.dry_run,
      force: body.force,
      tenant: tenantFilter(p),
      by: { actor: p.actor, reason: body.reason ?? null },
    });
    return c.json({ ...r, next_cursor: r.next_cursor ? encodeDeadCursor(r.next_cursor) : null });
  });

  return app;
}
