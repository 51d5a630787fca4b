import { expect } from "bun:test";
import { api } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";
import { Temporal } from "../../src/time/temporal.ts";

export { bearer, expectError, HOOK } from "../api/support.ts";

/** RFC 3339 UTC with Z, optional fraction. */
export const UTC_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
/** Local time with a numeric UTC offset, no zone name. */
export const LOCAL_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/;

/** POST /v1/schedules with `extra` over a minimal valid body (a public target, a yearly rule). */
export function createSchedule(rt: Runtime, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return api(rt, "POST", "/v1/schedules", { cron: "0 0 1 1 *", target: { url: "https://example.com/hook" }, ...extra }, headers);
}

/** Creates a schedule, failing unless the answer is 201; returns the schedule object. */
export async function mustSchedule(rt: Runtime, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const r = await createSchedule(rt, extra, headers);
  if (r.status !== 201) throw new Error(`expected 201, got ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Instants as epoch ms, failing on anything that does not parse. */
export function ms(iso: string): number {
  expect(typeof iso).toBe("string");
  const t = Date.parse(iso);
  if (Number.isNaN(t)) throw new Error(`not an instant: ${JSON.stringify(iso)}`);
  return t;
}

/** The UTC offset ("-05:00") of a zone at an instant, from Temporal. */
export function offsetAt(zone: string, atMs: number): string {
  return Temporal.Instant.fromEpochMilliseconds(atMs).toZonedDateTimeISO(zone).offset;
}

/**
 * The fire instants of a daily rule "M H * * <days>" in a zone, from fromMs on (strictly after
 * when `strict`), computed with Temporal alone: each calendar date, the wall time resolved the
 * classic-cron way (a gap time shifts forward, a fold time takes the first instant).
 * Weekdays are Temporal's (Monday 1 … Sunday 7).
 */
export function dailyInstants(zone: string, hour: number, minute: number, weekdays: number[], fromMs: number, n: number, strict = true): number[] {
  const out: number[] = [];
  let date = Temporal.Instant.fromEpochMilliseconds(fromMs).toZonedDateTimeISO(zone).toPlainDate().subtract({ days: 1 });
  for (let i = 0; out.length < n && i < 4000; i++, date = date.add({ days: 1 })) {
    if (!weekdays.includes(date.dayOfWeek)) continue;
    const at = date.toPlainDateTime({ hour, minute }).toZonedDateTime(zone, { disambiguation: "compatible" }).epochMilliseconds;
    if (strict ? at > fromMs : at >= fromMs) out.push(at);
  }
  return out;
}

/** Checks a preview entry: `at` in UTC with Z, `local` the same instant with the zone's offset. */
export function checkPreviewItem(p: { at: string; local: string }, zone: string) {
  expect(Object.keys(p).sort()).toEqual(["at", "local"]);
  expect(p.at).toMatch(UTC_ISO);
  expect(p.local).toMatch(LOCAL_ISO);
  const at = ms(p.at);
  expect(ms(p.local)).toBe(at);
  expect(p.local.slice(-6)).toBe(offsetAt(zone, at));
}

/** Every page of GET /v1/schedules for a query; checks the page shape as it goes. */
export async function allSchedulePages(rt: Runtime, query: string, limit: number, headers: Record<string, string> = {}) {
  const pages: any[][] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const r = await api(rt, "GET", `/v1/schedules?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, undefined, headers);
    expect(r.status).toBe(200);
    expect(Array.isArray(r.body.items)).toBe(true);
    expect(r.body.items.length).toBeLessThanOrEqual(limit);
    pages.push(r.body.items);
    cursor = r.body.next_cursor;
    if (cursor === null) return pages;
    expect(typeof cursor).toBe("string");
  }
  throw new Error("pagination did not end");
}
