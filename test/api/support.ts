import { expect } from "bun:test";
import { tok } from "../helpers/tokens.ts";
import { api } from "../helpers/scheduler.ts";
import type { Runtime } from "../../src/runtime.ts";

/** A public-looking target; it need not resolve (names that do not resolve are accepted). */
export const HOOK = "https://example.com/hook";

/** UUIDv7: version nibble 7, RFC 4122 variant. */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A Bearer header for a test token by its short name (see helpers/tokens.ts). */
export const bearer = (token: string) => ({ authorization: `Bearer ${tok(token)}` });

/** POST /v1/jobs with a minimal valid job merged with `extra`. */
export function createJob(rt: Runtime, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, ...extra }, headers);
}

/** Creates a job and returns its body, failing the test unless the answer is 201. */
export async function mustCreate(rt: Runtime, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const r = await createJob(rt, extra, headers);
  if (r.status !== 201) throw new Error(`expected 201, got ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Asserts the one error shape (README "The HTTP API"): { error: { code, message, path? } } and nothing else. */
export function expectError(r: { status: number; body: any }, status: number, path?: string | RegExp) {
  // Not toMatchObject with expect.any(): Bun 1.4.5 writes the matchers into the received object.
  if (r.status !== status) throw new Error(`expected HTTP ${status}, got ${r.status}: ${JSON.stringify(r.body)}`);
  expect(r.body && typeof r.body === "object" ? Object.keys(r.body) : r.body).toEqual(["error"]);
  expect(typeof r.body.error.code).toBe("string");
  expect(typeof r.body.error.message).toBe("string");
  expect(r.body.error.code.length).toBeGreaterThan(0);
  expect(r.body.error.message.length).toBeGreaterThan(0);
  for (const k of Object.keys(r.body.error)) expect(["code", "message", "path"]).toContain(k);
  if (typeof path === "string") expect(r.body.error.path).toBe(path);
  else if (path instanceof RegExp) expect(r.body.error.path).toMatch(path);
  return r.body.error as { code: string; message: string; path?: string };
}
