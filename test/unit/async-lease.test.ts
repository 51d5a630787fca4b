import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { JobRow } from "../../src/store/types.ts";
import { decideAsync } from "../../src/worker/async-finish.ts";
import { makeLeaseToken, tokenGeneration, verifyLeaseToken } from "../../src/worker/lease-token.ts";

const KEY = "0b8f4c1e-5d3a-4f7b-9c2e-8a1d6e4b3f70";
const JOB = "01935d1a-7b2c-7000-8000-000000000001";

describe("lease tokens", () => {
  test("HMAC-SHA256 of '<job id>.<generation>' with the job's key, generation in the clear", () => {
    const t = makeLeaseToken(KEY, JOB, 7);
    // Independent computation of the same construction.
    expect(t).toBe(`v1.7.${createHmac("sha256", KEY).update(`${JOB}.7`).digest("base64url")}`);
    expect(tokenGeneration(t)).toBe(7);
    expect(verifyLeaseToken(t, KEY, JOB)).toBe(true);
  });

  test("refused: another job, another key, a changed generation, no key, garbage", () => {
    const t = makeLeaseToken(KEY, JOB, 7);
    expect(verifyLeaseToken(t, KEY, "01935d1a-7b2c-7000-8000-000000000002")).toBe(false);
    expect(verifyLeaseToken(t, "another-key", JOB)).toBe(false);
    expect(verifyLeaseToken(t.replace("v1.7.", "v1.8."), KEY, JOB)).toBe(false);
    expect(verifyLeaseToken(t, null, JOB)).toBe(false);
    for (const bad of ["", "v1.7", "v1.x.abc", `v2.7.${t.split(".")[2]}`, `${t}x`]) {
      expect(tokenGeneration(bad)).toBeUndefined();
      expect(verifyLeaseToken(bad, KEY, JOB)).toBe(false);
    }
  });
});

function job(over: Partial<JobRow> = {}): JobRow {
  return {
    id: JOB,
    tenant: "default",
    status: "running",
    due_at: new Date(0),
    scheduled_for: new Date(0),
    priority: 0,
    version: 1,
    calls: 1,
    tries: 0,
    idempotency_key: null,
    request_hash: null,
    schedule_id: null,
    nominal_time: null,
    target: { url: "https://example.com/", method: "POST", headers: {}, body: null, json: false },
    max_attempts: 3,
    backoff_base_ms: 1000,
    backoff_max_ms: 60000,
    timeout_ms: 60000,
    expires_at: null,
    window_ms: 0,
    async: true,
    cancel_requested: false,
    throttle_until: null,
    epoch: 1,
    queued_at: null,
    lease_owner: "async",
    lease_generation: 1,
    lease_until: null,
    last_error: null,
    dead_reason: null,
    start_by: null,
    catchup_after: null,
    catchup: false,
    host_limits: null,
    lease_key: KEY,
    checkpoint: null,
    deadline_at: null,
    schema_version: 1,
    replays: 0,
    dead_signature: null,
    dead_streak: 0,
    replay: false,
    releases_held: false,
    slot: 0,
    finished_at: null,
    created_at: new Date(0),
    updated_at: new Date(0),
    ...over,
  };
}

describe("decideAsync", () => {
  const now = 1_000_000;
  const half = () => 0.5;

  test("succeeded → succeeded, a try counted, nothing to retry", () => {
    expect(decideAsync(job(), { kind: "succeeded" }, now, half)).toMatchObject({
      nextStatus: "succeeded",
      delayMs: null,
      countsTry: true,
      attemptOutcome: "success",
      lastError: null,
    });
  });

  test("failed → retried with backoff (a try used up); retry_after replaces the backoff delay", () => {
    expect(decideAsync(job(), { kind: "failed", error: "boom", retryAfterMs: null }, now, half)).toMatchObject({
      nextStatus: "scheduled",
      delayMs: 500,
      countsTry: true,
      attemptOutcome: "failed",
      lastError: "the target reported failure: boom",
    });
    expect(decideAsync(job(), { kind: "failed", error: null, retryAfterMs: 30_000 }, now, half)).toMatchObject({ nextStatus: "scheduled", delayMs: 30_000 });
  });

  test("failed on the last try → dead (max_attempts), retry_after or not", () => {
    expect(decideAsync(job({ tries: 2 }), { kind: "failed", error: null, retryAfterMs: 5000 }, now, half)).toMatchObject({
      nextStatus: "dead",
      deadReason: "max_attempts",
      delayMs: null,
    });
  });

  test("a retry_after past expires_at → expired", () => {
    expect(decideAsync(job({ expires_at: new Date(now + 10_000) }), { kind: "failed", error: null, retryAfterMs: 20_000 }, now, half)).toMatchObject({
      nextStatus: "expired",
      delayMs: null,
    });
  });

  test("timed out → unknown, possibly delivered, retried like any unknown outcome", () => {
    const d = decideAsync(job(), { kind: "timed_out" }, now, half);
    expect(d).toMatchObject({ nextStatus: "scheduled", countsTry: true, attemptOutcome: "unknown", possiblyDelivered: true });
    expect(d.lastError).toContain("timed out");
  });
});
