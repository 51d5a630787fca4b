import { Hono, type Context } from "hono";
import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { insertAudit, insertJobsIn, transactionNow } from "../store/jobs.ts";
import { externalize, loadPayload } from "../store/payloads.ts";
import { triggeredJob } from "../store/new-job.ts";
import {
  deleteSchedule,
  fieldsOf,
  getSchedule,
  insertSchedule,
  lockScheduleForRun,
  listSchedules,
  ScheduleQuotaError,
  updateSchedule,
  type ScheduleFields,
  type ScheduleRow,
} from "../store/schedules.ts";
import { type AppEnv, requireScope, tenantFilter, tenantForCreate, type Principal } from "./auth.ts";
import { badText } from "./input-guard.ts";
import { badRequest, conflict, notFound } from "./errors.ts";
import { checkTimeout, parseOrThrow, toHostLimits, toTarget } from "./job-input.ts";
import { jobView } from "./job-view.ts";
import { IF_VERSION, queryInt, readJson, REASON } from "./request.ts";
import { checkInterval, firstFire, ruleOrThrow, SCHEDULE_ID, ScheduleCreateSchema, SchedulePatchSchema } from "./schedule-input.ts";
import { scheduleView } from "./schedule-view.ts";
import type { CronRule } from "../time/cron-rule.ts";
import { checkTarget } from "./target-check.ts";
import * as v from "valibot";

const DAY = 86_400_000;
export const MAX_PREVIEW = 1000;
/**
 * A preview computes instants one by one on the API's event loop (up to a millisecond each on
 * a busy machine, more for sparse rules in zones with transitions: 1000 instants of
 * "0 0 29 2 1" in New York reach 236 years out and took 2.2 s). It stops at instants more than
 * PREVIEW_HORIZON_MS after its start (deterministic, and the bound that matters: only sparse
 * rules reach it), and after PREVIEW_BUDGET_MS of computing whatever happens (a safety net),
 * and says so (preview_truncated).
 */
export const PREVIEW_HORIZON_MS = 10 * 366 * DAY;
export const PREVIEW_BUDGET_MS = 2000;

// Exported for the OpenAPI document (src/api/openapi/), which documents these very schemas.
/** Body of /pause and /resume. */
export const ScheduleActionSchema = v.strictObject({ if_version: IF_VERSION, reason: REASON });
export const ScheduleTriggerSchema = v.strictObject({ reason: REASON });

export interface SchedulesRoutesDeps {
  db: Db;
  config: Pick<Config, "allowPrivateTargets" | "jobDefaults" | "payloadInlineMax" | "ceilings">;
}

const rowRule = (s: ScheduleRow | ScheduleFields) => ruleOrThrow(s.cron, s.timezone, { gap: s.dst_gap, fold: s.dst_fold });
/** A stored rule that this version no longer accepts still lists (its schedule is paused). */
const view = (s: ScheduleRow) => {
  try {
    return scheduleView(s, rowRule(s));
  } catch {
    return scheduleView(s, null);
  }
};

export function schedulesRoutes(deps: SchedulesRoutesDeps) {
  const { db, config } = deps;
  const app = new Hono<AppEnv>();
  const principal = (c: Context<AppEnv>): Principal => c.get("principal");
  /** Schedules live in one tenant: the token's, or for an all-tenant token ?tenant= (default "default"). */
  const tenantOf = (c: Context<AppEnv>) => tenantFilter(principal(c)) ?? c.req.query("tenant") ?? "default";
  const idOf = (c: Context<AppEnv>) => {
    const id = c.req.param("id")!;
    if (!SCHEDULE_ID.test(id)) throw notFound(`schedule ${id}`);
    return id;
  };
  // Every change that takes `by` writes its own audit row when it succeeds.
  const by = (c: Context<AppEnv>, reason?: string | null) => {
    c.set("audited", true);
    return { actor: principal(c).actor, reason: reason ?? null };
  };

  /** Checks a complete set of fields; throws 400 naming the field. */
  const validate = async (f: ScheduleFields) => {
    const rule = rowRule(f);
    checkInterval(rule, Date.now(), config.ceilings.minScheduleIntervalMs);
    if (f.start_at && f.end_at && f.end_at.getTime() <= f.start_at.getTime()) throw badRequest("end_at must be after start_at", "end_at");
    if (f.backoff_max_ms < f.backoff_base_ms) throw badRequest("retry.max must not be below retry.base", "retry.max");
    checkTimeout(f.async ?? false, f.timeout_ms, "timeout");
    if (!config.allowPrivateTargets) await checkTarget(f.target.url, "target.url", new Map());
    if (!config.allowPrivateTargets && f.verify_url) await checkTarget(f.verify_url, "verify.url", new Map());
    return rule;
  };

  app.post("/schedules", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:write");
    const body = parseOrThrow(ScheduleCreateSchema, await readJson(c));
    const d = config.jobDefaults;
    // A large body is stored once; every occurrence copies only its reference.
    const { target, payload } = externalize(toTarget(body.target), config.payloadInlineMax);
    const fields: ScheduleFields = {
      tenant: tenantForCreate(p, body.tenant),
      id: body.id ?? `sch_${Bun.randomUUIDv7()}`,
      cron: body.cron.trim(),
      timezone: body.timezone ?? "UTC",
      dst_gap: body.dst?.gap ?? null,
      dst_fold: body.dst?.fold ?? null,
      target,
      priority: body.priority ?? 0,
      max_attempts: body.retry?.max_attempts ?? d.maxAttempts,
      backoff_base_ms: body.retry?.base ?? d.backoffBaseMs,
      backoff_max_ms: body.retry?.max ?? d.backoffMaxMs,
      timeout_ms: body.timeout ?? d.timeoutMs,
      misfire: body.misfire ?? "fire_once",
      misfire_grace_ms: body.misfire_grace ?? null,
      catchup_window_ms: body.catchup_window ?? DAY,
      overlap: body.overlap ?? "skip",
      max_queued: body.max_queued ?? 1,
      window_ms: body.window ?? 0,
      paused: body.paused ?? false,
      start_at: body.start_at ?? null,
      end_at: body.end_at ?? null,
      next_fire_at: null,
      host_limits: toHostLimits(body.host_limits),
      async: body.async ?? false,
      verify_url: body.verify?.url ?? null,
    };
    const rule = await validate(fields);
    // From the database's now, read in the inserting transaction.
    const quota = config.ceilings.schedulesOverrides[fields.tenant] ?? config.ceilings.maxSchedules;
    let row: ScheduleRow | undefined;
    try {
      row = await insertSchedule(db, fields, by(c), payload ? [payload] : [], (nowMs) => firstFire(rule, nowMs, fields.start_at, fields.end_at), quota);
    } catch (err) {
      if (err instanceof ScheduleQuotaError) throw conflict("schedule_quota_exceeded", err.message);
      throw err;
    }
    if (!row) throw conflict("schedule_exists", `schedule ${fields.id} already exists in tenant ${fields.tenant}`);
    return c.json(view(row), 201);
  });

  app.get("/schedules", async (c) => {
    const p = principal(c);
    requireScope(p, "jobs:read");
    const limit = queryInt("limit", c.req.query("limit"), 1, 1000, 100);
    const cursor = c.req.query("cursor");
    let after: { tenant: string; id: string } | null = null;
    if (cursor) {
      try {
        const [tenant, id] = JSON.parse(Buffer.from(cursor, "base64url").toString()) as [string, string];
        if (typeof tenant !== "string" || typeof id !== "string" || badText(tenant) || badText(id)) throw new Error();
        after = { tenant, id };
      } catch {
        throw badRequest("cursor is not one this API gave out", "cursor");
      }
    }
    const tenant = tenantFilter(p) ?? c.req.query("tenant") ?? null;
    const rows = await listSchedules(db, { tenant, after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return c.json({
      items: page.map(view),
      next_cursor: rows.length > limit && last ? Buffer.from(JSON.stringify([last.tenant, last.id])).toString("base64url") : null,
    });
  });

  app.get("/schedules/:id", async (c) => {
    requireScope(principal(c), "jobs:read");
    const row = await getSchedule(db, tenantOf(c), idOf(c));
    if (!row) throw notFound(`schedule ${c.req.param("id")}`);
    const n = queryInt("preview", c.req.query("preview"), 0, MAX_PREVIEW, 0);
    let rule: CronRule | null = null;
    try {
      rule = rowRule(row);
    } catch {
      // A stored rule this version rejects: the schedule is shown (paused, with the
      // reason), but it has no instants to preview.
    }
    const stored = row.target.body_ref ? await loadPayload(db, row.target.body_ref) : undefined;
    const out: Record<string, unknown> = scheduleView(row, rule, stored);
    if (n > 0 && rule) {
      // The next N fire instants from max(now, start_at), each with its UTC offset.
      const from = Math.max((await transactionNow(db)).getTime(), row.start_at ? row.start_at.getTime() - 1 : 0);
      const until = row.end_at?.getTime() ?? Infinity;
      const horizon = from + PREVIEW_HORIZON_MS;
      const deadline = performance.now() + PREVIEW_BUDGET_MS;
      const at: number[] = [];
      for (let t = from; at.length < n; ) {
        if (performance.now() > deadline) {
          out.preview_truncated = true;
          break;
        }
        const x = rule.nextAfter(t);
        if (x === null || x > until) break;
        if (x > horizon) {
          out.preview_truncated = true;
          break;
        }
        at.push(x);
        t = x;
      }
      out.preview = at.map((ms) => ({ at: new Date(ms).toISOString(), local: rule.local(ms) }));
    }
    return c.json(out);
  });

  app.patch("/schedules/:id", async (c) => {
    requireScope(principal(c), "jobs:write");
    const body = parseOrThrow(SchedulePatchSchema, await readJson(c));
    const tenant = tenantOf(c);
    const id = idOf(c);
    const ext = body.target ? externalize(toTarget(body.target), config.payloadInlineMax) : undefined;
    const newTarget = ext?.target;
    if (newTarget && !config.allowPrivateTargets) await checkTarget(newTarget.url, "target.url", new Map());
    if (body.verify && !config.allowPrivateTargets) await checkTarget(body.verify.url, "verify.url", new Map());
    const result = await updateSchedule(
      db,
      tenant,
      id,
      body.if_version ?? null,
      { ...by(c, body.reason), action: "schedule.updated" },
      (cur, dbNowMs) => {
        const f = fieldsOf(cur);
        const next: ScheduleFields = {
          ...f,
          cron: body.cron?.trim() ?? f.cron,
          timezone: body.timezone ?? f.timezone,
          dst_gap: body.dst ? (body.dst.gap ?? null) : f.dst_gap,
          dst_fold: body.dst ? (body.dst.fold ?? null) : f.dst_fold,
          target: newTarget ?? f.target,
          priority: body.priority ?? f.priority,
          max_attempts: body.retry?.max_attempts ?? f.max_attempts,
          backoff_base_ms: body.retry?.base ?? f.backoff_base_ms,
          backoff_max_ms: body.retry?.max ?? f.backoff_max_ms,
          timeout_ms: body.timeout ?? f.timeout_ms,
          misfire: body.misfire ?? f.misfire,
          misfire_grace_ms: body.misfire_grace !== undefined ? body.misfire_grace : f.misfire_grace_ms,
          catchup_window_ms: body.catchup_window ?? f.catchup_window_ms,
          overlap: body.overlap ?? f.overlap,
          max_queued: body.max_queued ?? f.max_queued,
          window_ms: body.window ?? f.window_ms,
          paused: body.paused ?? f.paused,
          paused_reason: body.paused === false ? null : f.paused_reason,
          start_at: body.start_at !== undefined ? body.start_at : f.start_at,
          end_at: body.end_at !== undefined ? body.end_at : f.end_at,
          host_limits: body.host_limits !== undefined ? toHostLimits(body.host_limits) : f.host_limits,
          async: body.async ?? f.async,
          verify_url: body.verify !== undefined ? (body.verify?.url ?? null) : (f.verify_url ?? null),
        };
        const rule = rowRule(next);
        if (next.start_at && next.end_at && next.end_at.getTime() <= next.start_at.getTime()) throw badRequest("end_at must be after start_at", "end_at");
        if (next.backoff_max_ms < next.backoff_base_ms) throw badRequest("retry.max must not be below retry.base", "retry.max");
        checkTimeout(next.async ?? false, next.timeout_ms, "timeout");
        const ruleChanged = next.cron !== f.cron || next.timezone !== f.timezone || next.dst_gap !== f.dst_gap || next.dst_fold !== f.dst_fold;
        // A rule stored before the minimum (or under a lower one) keeps running; a new one must obey it.
        if (ruleChanged) checkInterval(rule, dbNowMs, config.ceilings.minScheduleIntervalMs);
        const boundsChanged = next.start_at?.getTime() !== f.start_at?.getTime() || next.end_at?.getTime() !== f.end_at?.getTime();
        if (ruleChanged || f.next_fire_at === null) {
          // A new rule starts afresh from now: what the old rule missed is not the new one's.
          next.next_fire_at = firstFire(rule, dbNowMs, next.start_at, next.end_at);
        } else if (boundsChanged) {
          // Same rule, new bounds: keep the place (an occurrence due but not yet generated, or
          // a paused backlog, stays for the misfire policy), moved forward to start_at and
          // stopped at end_at.
          let n: Date | null = f.next_fire_at;
          if (next.start_at && n.getTime() < next.start_at.getTime()) n = firstFire(rule, next.start_at.getTime(), next.start_at, next.end_at);
          if (n && next.end_at && n.getTime() > next.end_at.getTime()) n = null;
          next.next_fire_at = n;
        }
        return next;
      },
      ext?.payload ? [ext.payload] : [],
    );
    return c.json(answer(result, id));
  });

  const answer = (r: Awaited<ReturnType<typeof updateSchedule>>, id: string) => {
    if (r.kind === "missing") throw notFound(`schedule ${id}`);
    if (r.kind === "version") throw conflict("version_mismatch", `schedule ${id} is at version ${r.current}`);
    return view(r.row);
  };

  app.post("/schedules/:id/pause", async (c) => {
    requireScope(principal(c), "jobs:write");
    const body = parseOrThrow(ScheduleActionSchema, await readJson(c));
    const id = idOf(c);
    const r = await updateSchedule(db, tenantOf(c), id, body.if_version ?? null, { ...by(c, body.reason), action: "schedule.paused" }, (cur) => ({
      ...fieldsOf(cur),
      paused: true,
      paused_reason: body.reason ?? "paused by request",
    }));
    return c.json(answer(r, id));
  });

  app.post("/schedules/:id/resume", async (c) => {
    requireScope(principal(c), "jobs:write");
    const body = parseOrThrow(ScheduleActionSchema, await readJson(c));
    const id = idOf(c);
    // next_fire_at stays where it stopped: the misfire policy decides what the pause missed.
    const r = await updateSchedule(db, tenantOf(c), id, body.if_version ?? null, { ...by(c, body.reason), action: "schedule.resumed" }, (cur) => ({
      ...fieldsOf(cur),
      paused: false,
      paused_reason: null,
    }));
    return c.json(answer(r, id));
  });

  app.delete("/schedules/:id", async (c) => {
    requireScope(principal(c), "jobs:write");
    const id = idOf(c);
    const r = await deleteSchedule(db, tenantOf(c), id, by(c, c.req.query("reason")));
    if (!r) throw notFound(`schedule ${id}`);
    return c.json({ id, tenant: r.row.tenant, deleted: true, cancelled_occurrences: r.cancelled });
  });

  app.post("/schedules/:id/trigger", async (c) => {
    requireScope(principal(c), "jobs:write");
    const body = parseOrThrow(ScheduleTriggerSchema, await readJson(c));
    const id = idOf(c);
    // A manual run now, outside the rule: its nominal time is now (the database's, in the
    // inserting transaction), and overlap does not apply to it. The schedule is locked: under
    // skip or queue, its occurrence made ahead of its instant is taken back (lockScheduleForRun).
    const made = await db.tx(async (q) => {
      const s = await lockScheduleForRun(q, tenantOf(c), id);
      if (!s) return undefined;
      const now = await transactionNow(q);
      const [r] = await insertJobsIn(q, [triggeredJob(s, now)]);
      return { s, r: r! };
    });
    if (!made) throw notFound(`schedule ${id}`);
    const { s, r } = made;
    c.set("audited", true);
    await insertAudit(db, {
      actor: principal(c).actor,
      tenant: s.tenant,
      action: "schedule.triggered",
      objectId: s.id,
      reason: body.reason ?? null,
      details: { job_id: r.job.id },
    });
    return c.json(jobView(r.job), 201);
  });

  return app;
}
