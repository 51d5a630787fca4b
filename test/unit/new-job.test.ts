import { describe, expect, test } from "bun:test";
import { newJob, occurrenceJob, triggeredJob, windowJitter, type JobRequest } from "../../src/store/new-job.ts";
import type { ScheduleRow } from "../../src/store/schedules.ts";

const DEFAULTS = { maxAttempts: 5, backoffBaseMs: 1000, backoffMaxMs: 60_000, timeoutMs: 30_000 };
const TARGET = { url: "https://example.com/hook", method: "POST", headers: {}, body: null, json: false };

const request = (over: Partial<JobRequest> = {}): JobRequest => ({
  tenant: "t1",
  target: TARGET,
  window: 0,
  priority: 0,
  request_hash: null,
  retry: {},
  async: false,
  host_limits: null,
  verify_url: null,
  ...over,
});

const schedule = (over: Partial<ScheduleRow> = {}): ScheduleRow => ({
  tenant: "t1",
  id: "nightly",
  cron: "0 3 * * *",
  timezone: "UTC",
  dst_gap: null,
  dst_fold: null,
  target: TARGET,
  priority: 7,
  max_attempts: 3,
  backoff_base_ms: 2000,
  backoff_max_ms: 90000,
  timeout_ms: 15000,
  misfire: "fire_once",
  misfire_grace_ms: null,
  catchup_window_ms: 3600000,
  overlap: "skip",
  max_queued: 1,
  window_ms: 0,
  paused: false,
  paused_reason: null,
  start_at: null,
  end_at: null,
  next_fire_at: null,
  host_limits: { rate: 2 },
  async: true,
  verify_url: "https://example.com/verify",
  last_nominal_at: null,
  occurrences_generated: 0,
  occurrences_skipped: 0,
  occurrences_misfired: 0,
  last_skip_at: null,
  last_skip_reason: null,
  version: 1,
  created_at: new Date(0),
  updated_at: new Date(0),
  ...over,
});

const T = Date.parse("2026-12-01T03:00:00Z");

describe("windowJitter", () => {
  test("whole ms in [0, window]: later, never earlier", () => {
    expect(windowJitter(0, () => 0.999)).toBe(0);
    expect(windowJitter(1000, () => 0)).toBe(0);
    expect(windowJitter(1000, () => 0.5)).toBe(500);
    expect(windowJitter(1000, () => 0.9999999)).toBe(1000);
    for (let i = 0; i < 1000; i++) {
      const j = windowJitter(10);
      expect(Number.isInteger(j) && j >= 0 && j <= 10).toBe(true);
    }
  });
});

describe("newJob", () => {
  test("what the request leaves unsaid comes from the defaults", () => {
    const j = newJob(request(), DEFAULTS);
    expect(j).toMatchObject({
      tenant: "t1",
      due_at: null,
      delay_ms: 0,
      priority: 0,
      idempotency_key: null,
      request_hash: null,
      schedule_id: null,
      nominal_time: null,
      target: TARGET,
      max_attempts: 5,
      backoff_base_ms: 1000,
      backoff_max_ms: 60_000,
      timeout_ms: 30_000,
      expires_at: null,
      window_ms: 0,
      async: false,
      host_limits: null,
      verify_url: null,
    });
    expect(j.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  });

  test("what the request says wins over the defaults", () => {
    const expires = new Date(T + 86_400_000);
    const j = newJob(
      request({
        retry: { max_attempts: 9, base: 10, max: 20 },
        timeout: 5,
        expires_at: expires,
        priority: -3,
        idempotency_key: "k",
        request_hash: "h",
        async: true,
        host_limits: { concurrency: 1 },
        verify_url: "https://v",
      }),
      DEFAULTS,
    );
    expect(j).toMatchObject({
      max_attempts: 9,
      backoff_base_ms: 10,
      backoff_max_ms: 20,
      timeout_ms: 5,
      expires_at: expires,
      priority: -3,
      idempotency_key: "k",
      request_hash: "h",
      async: true,
      host_limits: { concurrency: 1 },
      verify_url: "https://v",
    });
  });

  test("a delay (or none) is counted in the INSERT, from the database's now, plus the window's jitter", () => {
    const j = newJob(request({ delay: 5000, window: 1000 }), DEFAULTS, () => 0.25);
    expect(j.due_at).toBeNull();
    expect(j.delay_ms).toBe(5250);
    expect(j.window_ms).toBe(1000);
  });

  test("run_at is moved later by the window's jitter, and carries no delay_ms", () => {
    const j = newJob(request({ run_at: new Date(T), window: 1000 }), DEFAULTS, () => 0.5);
    expect(j.due_at).toEqual(new Date(T + 500));
    expect("delay_ms" in j).toBe(false);
  });

  test("every job gets its own id", () => {
    expect(newJob(request(), DEFAULTS).id).not.toBe(newJob(request(), DEFAULTS).id);
  });
});

describe("occurrenceJob", () => {
  const onTime = { nominal: T, late: false, graceMs: 60_000, spread: T + 300, due: T + 300, heldBack: false };

  test("copies the schedule, names the occurrence by its nominal time, is due at its spread instant", () => {
    const j = occurrenceJob(schedule({ window_ms: 1000 }), onTime);
    expect(j).toMatchObject({
      tenant: "t1",
      priority: 7,
      idempotency_key: "nightly@2026-12-01T03:00:00.000Z",
      request_hash: null,
      schedule_id: "nightly",
      nominal_time: new Date(T),
      target: TARGET,
      max_attempts: 3,
      backoff_base_ms: 2000,
      backoff_max_ms: 90_000,
      timeout_ms: 15_000,
      expires_at: null,
      window_ms: 1000,
      async: true,
      host_limits: { rate: 2 },
      verify_url: "https://example.com/verify",
      due_at: new Date(T + 300),
      scheduled_for: new Date(T + 300),
      catchup: false,
      catchup_after: new Date(T + 300 + 60_000),
    });
  });

  test("an on-time occurrence must start within the catch-up window; under skip or strictStart, within its grace", () => {
    expect(occurrenceJob(schedule(), onTime).start_by).toEqual(new Date(T + 300 + 3_600_000));
    expect(occurrenceJob(schedule({ misfire: "skip" }), onTime).start_by).toEqual(new Date(T + 300 + 60_000));
    expect(occurrenceJob(schedule(), { ...onTime, strictStart: true }).start_by).toEqual(new Date(T + 300 + 60_000));
  });

  test("a paced catch-up gets at least its grace after its release", () => {
    const late = { nominal: T, late: true, graceMs: 60_000, spread: T, due: T + 7_200_000, heldBack: false };
    const j = occurrenceJob(schedule(), late);
    expect(j.catchup).toBe(true);
    expect(j.due_at).toEqual(new Date(T + 7_200_000));
    expect(j.start_by).toEqual(new Date(T + 7_200_000 + 60_000));
    expect(j.catchup_after).toEqual(new Date(T + 60_000));
  });

  test("a held occurrence is due at infinity, and shows the instant it was due", () => {
    const j = occurrenceJob(schedule(), { ...onTime, heldBack: true });
    expect(j.due_at).toBe("infinity");
    expect(j.scheduled_for).toEqual(new Date(T + 300));
  });
});

describe("triggeredJob", () => {
  test("a manual run: nominal and due now, no window, no start-by", () => {
    const now = new Date(T + 1234);
    const j = triggeredJob(schedule({ window_ms: 5000 }), now);
    expect(j).toMatchObject({
      tenant: "t1",
      due_at: now,
      nominal_time: now,
      idempotency_key: "nightly@2026-12-01T03:00:01.234Z",
      schedule_id: "nightly",
      window_ms: 0,
      max_attempts: 3,
      backoff_base_ms: 2000,
      backoff_max_ms: 90_000,
      timeout_ms: 15_000,
      async: true,
      host_limits: { rate: 2 },
      verify_url: "https://example.com/verify",
    });
    expect(j.start_by).toBeUndefined();
    expect(j.scheduled_for).toBeUndefined();
    expect(j.catchup).toBeUndefined();
  });
});
