/**
 * The invariants, checked after a round from the job, attempt and schedule records in the
 * database and from the target's log. Each is a named check whose failure lists the
 * offending jobs (or schedules) and why.
 */
import type postgres from "postgres";
import type { OneOff, ScheduleSpec } from "./load.ts";
import type { ChaosCall } from "./target.ts";

export interface CheckResult {
  name: string;
  violations: string[];
}

export interface Snapshot {
  calls: ChaosCall[];
  jobs: JobFacts[];
  attempts: { job_id: string; number: number; epoch: string | null; outcome: string | null }[];
  /** Attempts still open (no outcome) on a job that is not running: nobody will ever close them. */
  openAttempts: { job_id: string; number: number; status: string }[];
  schedules: {
    id: string;
    paused: boolean;
    paused_reason: string | null;
    next_fire_ms: number | null;
    misfired: number;
    generated: number;
    skipped: number;
    created_ms: number;
  }[];
  dbNow: number;
}

export interface JobFacts {
  id: string;
  status: string;
  schedule_id: string | null;
  idempotency_key: string | null;
  held: boolean;
  due_ms: number | null;
  nominal_ms: number | null;
  scheduled_for_ms: number;
  created_ms: number;
  finished_ms: number | null;
  last_error: string | null;
}

const TERMINAL = new Set(["succeeded", "dead", "cancelled", "expired"]);
const ms = (col: string) => `floor(extract(epoch from ${col}) * 1000)::float8`;

/** Reads the target's log first, then the database: every call seen refers to a job already written. */
export async function snapshot(sql: postgres.Sql, calls: ChaosCall[]): Promise<Snapshot> {
  const seen = [...calls];
  const jobs = await sql.unsafe<JobFacts[]>(`
    select id::text, status, schedule_id, idempotency_key, due_at = 'infinity' as held,
      case when due_at = 'infinity' then null else ${ms("due_at")} end as due_ms,
      ${ms("nominal_time")} as nominal_ms, ${ms("scheduled_for")} as scheduled_for_ms,
      ${ms("created_at")} as created_ms, ${ms("finished_at")} as finished_ms, last_error
    from jobs`);
  const attempts = await sql.unsafe<Snapshot["attempts"]>("select job_id::text, number, epoch::text, outcome from attempts order by job_id, number");
  const openAttempts = await sql.unsafe<Snapshot["openAttempts"]>(
    "select a.job_id::text, a.number, j.status from attempts a join jobs j on j.id = a.job_id where a.outcome is null and j.status <> 'running' order by a.job_id, a.number",
  );
  const schedules = await sql.unsafe<Snapshot["schedules"]>(`
    select id, paused, paused_reason, ${ms("next_fire_at")} as next_fire_ms, occurrences_misfired::int as misfired,
      occurrences_generated::int as generated, occurrences_skipped::int as skipped, ${ms("created_at")} as created_ms
    from schedules`);
  const [{ now }] = await sql.unsafe<{ now: number }[]>(`select ${ms("now()")} as now`);
  return { calls: seen, jobs: [...jobs], attempts: [...attempts], openAttempts: [...openAttempts], schedules: [...schedules], dbNow: now };
}

export interface CheckInput {
  snap: Snapshot;
  oneOffs: OneOff[];
  schedules: ScheduleSpec[];
  /** The database's now() when the load stopped: jobs due by then must have finished. */
  tEnd: number;
}

const iso = (t: number | null) => (t === null ? "—" : new Date(t).toISOString());
/** The due instant the job was created with: its nominal time, or the instant of its creation's run_at / now() + delay. */
const originDue = (j: JobFacts) => j.nominal_ms ?? j.scheduled_for_ms;

export function checkAll(input: CheckInput): CheckResult[] {
  return [lostOrStranded(input), twoSuccesses(input), earlyCalls(input), sameIds(input), fencing(input), unaskedPauseOrExpiry(input), openAttempts(input)];
}

/**
 * An attempt is closed by its worker's completion, by the reaper (lost) or, for an accepted
 * async call, by the target's report; only a running job may have one open. One left open on
 * a job that moved on was missed by a reap racing the call's start (hole 4).
 */
function openAttempts({ snap }: CheckInput): CheckResult {
  return {
    name: "no attempt left open on a job that is not running",
    violations: snap.openAttempts.map((a) => `${a.job_id}: attempt ${a.number} has no outcome, the job is ${a.status}`),
  };
}

/** Every acknowledged job exists; every job due by the end is terminal or due in the future; "allow" schedules miss no occurrence. */
function lostOrStranded({ snap, oneOffs, schedules, tEnd }: CheckInput): CheckResult {
  const v: string[] = [];
  const byId = new Map(snap.jobs.map((j) => [j.id, j]));
  for (const o of oneOffs) if (o.id && !byId.has(o.id)) v.push(`${o.id} (${o.key}): acknowledged by the API, not in the database`);
  const activeBySchedule = new Map<string, number>();
  for (const j of snap.jobs) {
    if (j.schedule_id && !TERMINAL.has(j.status) && !j.held) activeBySchedule.set(j.schedule_id, (activeBySchedule.get(j.schedule_id) ?? 0) + 1);
  }
  for (const j of snap.jobs) {
    if (TERMINAL.has(j.status) || originDue(j) > tEnd) continue;
    if (j.status === "scheduled" && !j.held && j.due_ms !== null && j.due_ms > snap.dbNow) continue;
    if (j.held && (activeBySchedule.get(j.schedule_id!) ?? 0) > 0) continue;
    v.push(
      `${j.id} (${j.schedule_id ?? j.idempotency_key}): ${j.status}${j.held ? " held" : ""}, due ${iso(j.due_ms)}, due at creation ${iso(originDue(j))} (before the end ${iso(tEnd)}); last_error ${JSON.stringify(j.last_error)}`,
    );
  }
  for (const s of schedules.filter((s) => s.overlap === "allow")) {
    const nominals = new Set(snap.jobs.filter((j) => j.schedule_id === s.id && j.nominal_ms !== null).map((j) => j.nominal_ms!));
    const row = snap.schedules.find((r) => r.id === s.id);
    if (!row) {
      v.push(`schedule ${s.id}: acknowledged by the API, not in the database`);
      continue;
    }
    // Every nominal instant after the schedule's creation (its rules are UTC steps), up to the end.
    const first = Math.floor(row.created_ms / s.stepMs) * s.stepMs + s.stepMs;
    const missing: number[] = [];
    for (let t = first; t <= tEnd; t += s.stepMs) if (!nominals.has(t)) missing.push(t);
    const misfired = snap.schedules.find((r) => r.id === s.id)?.misfired ?? 0;
    if (missing.length > misfired)
      v.push(
        `schedule ${s.id} (overlap allow): ${missing.length} occurrences missing (misfire counted ${misfired}): ${missing.slice(0, 5).map(iso).join(", ")}${missing.length > 5 ? ", …" : ""}`,
      );
  }
  for (const s of snap.schedules) {
    if (!s.paused && s.next_fire_ms !== null && s.next_fire_ms < snap.dbNow - 10_000)
      v.push(`schedule ${s.id}: generation stalled, next_fire_at ${iso(s.next_fire_ms)} is ${Math.round((snap.dbNow - s.next_fire_ms) / 1000)} s in the past`);
  }
  return { name: "no job lost or stranded", violations: v };
}

function twoSuccesses({ snap }: CheckInput): CheckResult {
  const n = new Map<string, number[]>();
  for (const a of snap.attempts) if (a.outcome === "success") n.set(a.job_id, [...(n.get(a.job_id) ?? []), a.number]);
  const v = [...n].filter(([, nums]) => nums.length > 1).map(([id, nums]) => `${id}: attempts ${nums.join(", ")} all recorded success`);
  return { name: "no job with two successful attempts", violations: v };
}

/**
 * A call arriving before the job's due instant by the database's clock. The target runs on
 * the database's host, so its Date.now() reads the same clock as PostgreSQL's now(); both
 * sides are floored to the millisecond (PostgreSQL keeps microseconds, Date.now() is already
 * floored), so a call at or after the due instant can never compare as earlier: no tolerance
 * is needed, and none is given. The due instant is what the database decided at creation:
 * the nominal time of an occurrence, run_at, or the insert's now() + delay — the latter read
 * from created_at, so a due time computed from a process's own clock is caught too.
 */
function earlyCalls({ snap, oneOffs }: CheckInput): CheckResult {
  const v: string[] = [];
  const byId = new Map(snap.jobs.map((j) => [j.id, j]));
  const spec = new Map(oneOffs.map((o) => [o.key, o]));
  for (const c of snap.calls) {
    const j = c.webhookId ? byId.get(c.webhookId) : undefined;
    if (!j) continue;
    const o = j.idempotency_key ? spec.get(j.idempotency_key) : undefined;
    let due = originDue(j);
    if (o?.delayMs != null) due = Math.max(due, j.created_ms + o.delayMs);
    if (o?.runAt != null) due = Math.max(due, o.runAt);
    if (c.at < due)
      v.push(`${j.id} (${j.schedule_id ?? j.idempotency_key}): attempt ${c.attempt} arrived ${iso(c.at)}, ${due - c.at} ms before its due instant ${iso(due)}`);
  }
  return { name: "no call before due (database clock)", violations: v };
}

/** Calls of one job (by its path, and nominal time for occurrences) all carry its id as webhook-id and its key as Idempotency-Key. */
function sameIds({ snap }: CheckInput): CheckResult {
  const v: string[] = [];
  const byKey = new Map(snap.jobs.filter((j) => j.idempotency_key).map((j) => [j.idempotency_key!, j]));
  const groups = new Map<string, ChaosCall[]>();
  for (const c of snap.calls) {
    const m = /\/(j|s)\/([^/]+)$/.exec(c.path);
    if (!m) {
      v.push(`a call to ${c.path} that no job of the load has`);
      continue;
    }
    const expectedKey = m[1] === "j" ? m[2]! : `${m[2]}@${c.nominal}`;
    groups.set(expectedKey, [...(groups.get(expectedKey) ?? []), c]);
  }
  for (const [key, calls] of groups) {
    const j = byKey.get(key);
    const ids = new Set(calls.map((c) => c.webhookId));
    const keys = new Set(calls.map((c) => c.key));
    if (!j) v.push(`${key}: ${calls.length} calls, no job with this idempotency key in the database (webhook-id ${[...ids].join(", ")})`);
    else if (ids.size !== 1 || !ids.has(j.id)) v.push(`${j.id} (${key}): webhook-id of its ${calls.length} calls: ${[...ids].join(", ")}`);
    if (j && (keys.size !== 1 || !keys.has(key))) v.push(`${j.id} (${key}): Idempotency-Key of its ${calls.length} calls: ${[...keys].join(", ")}`);
  }
  return { name: "repeated calls carry the same webhook-id and Idempotency-Key", violations: v };
}

/**
 * Per job, in the order the scheduler numbered its attempts (Scheduler-Attempt, assigned in
 * the database), the fencing token never goes down — at the target and in the attempt
 * records. Arrival order is not the measure: a call from a worker paused between its
 * pre-call check and the send may land after a newer one, and is refused (409) for it.
 */
function fencing({ snap }: CheckInput): CheckResult {
  const v: string[] = [];
  const byJob = new Map<string, ChaosCall[]>();
  for (const c of snap.calls) {
    if (!c.webhookId) continue;
    if (c.token === null || c.attempt === null) {
      v.push(`${c.webhookId}: a call without a fencing token or attempt number (${c.path})`);
      continue;
    }
    byJob.set(c.webhookId, [...(byJob.get(c.webhookId) ?? []), c]);
  }
  for (const [id, calls] of byJob) {
    calls.sort((a, b) => a.attempt! - b.attempt!);
    for (let i = 1; i < calls.length; i++) {
      if (calls[i]!.token! < calls[i - 1]!.token!)
        v.push(
          `${id}: attempt ${calls[i]!.attempt} carried token ${calls[i]!.token} after attempt ${calls[i - 1]!.attempt} carried ${calls[i - 1]!.token} (target)`,
        );
    }
  }
  let prev: Snapshot["attempts"][number] | undefined;
  for (const a of snap.attempts) {
    if (prev && prev.job_id === a.job_id && a.epoch !== null && prev.epoch !== null && BigInt(a.epoch) < BigInt(prev.epoch)) {
      v.push(`${a.job_id}: attempt ${a.number} recorded epoch ${a.epoch} after attempt ${prev.number} recorded ${prev.epoch} (attempts table)`);
    }
    if (a.epoch !== null) prev = a;
    else if (prev?.job_id !== a.job_id) prev = undefined;
  }
  return { name: "fencing tokens never decrease per job", violations: v };
}

/**
 * The harness pauses nothing and its targets never answer 410, so no schedule may be paused.
 * No one-off has expires_at, so none may expire. An occurrence may expire only as its misfire
 * policy says: not while held for the one before it (waiting is not a miss), and only once
 * it is later than its grace after its nominal time.
 */
function unaskedPauseOrExpiry({ snap, schedules }: CheckInput): CheckResult {
  const v: string[] = [];
  for (const s of snap.schedules) if (s.paused) v.push(`schedule ${s.id}: paused (${s.paused_reason})`);
  const grace = new Map(schedules.map((s) => [s.id, s.graceMs]));
  for (const j of snap.jobs) {
    if (j.status !== "expired") continue;
    if (!j.schedule_id) {
      v.push(`${j.id} (${j.idempotency_key}): a one-off job without expires_at expired (${j.last_error})`);
      continue;
    }
    if (j.held) v.push(`${j.id} (${j.schedule_id} @ ${iso(j.nominal_ms)}): expired while held for the occurrence before it (${j.last_error})`);
    else if (j.finished_ms !== null && j.nominal_ms !== null && j.finished_ms < j.nominal_ms + (grace.get(j.schedule_id) ?? 0)) {
      v.push(
        `${j.id} (${j.schedule_id} @ ${iso(j.nominal_ms)}): expired ${j.finished_ms - j.nominal_ms} ms after its nominal time, inside its ${grace.get(j.schedule_id)} ms grace (${j.last_error})`,
      );
    }
  }
  return { name: "no schedule paused nor occurrence expired unasked", violations: v };
}
