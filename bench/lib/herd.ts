/**
 * The 9:00:00 thundering herd: N jobs all due at one instant, created ahead of it, against a
 * scheduler in its own process, and what the target saw. Shared by bench/herd.ts and
 * test/flow/herd.test.ts.
 */
import { createJobs, type Created } from "./create-jobs.ts";
import { createSchedules } from "./create-schedules.ts";
import { machineCpuSeconds } from "./machine.ts";
import { procCpuSeconds, procMemoryBytes } from "./scheduler-process.ts";
import { percentile, type CpuShare } from "./stats.ts";
import type { RecordingTarget } from "./target.ts";

/** The scheduler under test: its address and process id (RSS and CPU come from /proc). */
export interface HerdScheduler {
  url: string;
  pid: number;
  /** Throws if the process has died. */
  assertAlive(): void;
}

export interface HerdSettings {
  jobs: number;
  /** The herd is due this long after creation starts. */
  leadMs: number;
  /** From the due instant: give up waiting for the last first call after this. */
  timeoutMs: number;
  /** After the last first call, keep listening this long for repeated calls. */
  settleMs: number;
  /** Jobs per POST /v1/jobs/batch, and such requests in flight. */
  batch: number;
  postConcurrency: number;
  /**
   * The herd is this many schedules' occurrences, all due at one instant, instead of jobs:
   * each schedule made through POST /v1/schedules with this overlap policy. The target must
   * key its calls by Idempotency-Key.
   */
  schedules?: "allow" | "skip" | "queue";
}

/**
 * A lead that leaves creation time to spare on the reference box: 3 s plus 0.2 ms per job,
 * i.e. creation at 5000 jobs/s (it runs at ~10k/s there). 50k jobs: 13 s.
 */
export function defaultLeadMs(jobs: number): number {
  return 3000 + Math.ceil(jobs * 0.2);
}

/**
 * The same for schedules, made one a request: 3 s plus 2.5 ms a schedule (creation at 400
 * schedules/s; it runs at ~1,000/s on the reference box). 10k schedules: 28 s.
 */
export function defaultScheduleLeadMs(schedules: number): number {
  return 3000 + Math.ceil(schedules * 2.5);
}

export interface HerdFigures {
  jobs: number;
  /** The one due instant of the herd, as the API stored it. */
  dueAt: string;
  createSeconds: number;
  /** Due instant − end of creation: how much of the lead was left (negative: creation was late). */
  slackMs: number;
  /** Jobs whose batch was answered only after they were due (must be 0 for a fair run). */
  createdLate: number;
  delivered: number;
  missing: number;
  /** Extra calls: a job called k times adds k − 1. */
  duplicates: number;
  /** Calls that arrived before the job's due_at as the API returned it. */
  early: number;
  /** Calls that arrived before the Scheduler-Scheduled-For header they carried (or carried none). */
  earlyByHeader: number;
  /** First calls whose Scheduler-Scheduled-For is not the due_at the API returned for the job. */
  headerMismatch: number;
  /** Due instant → last first call. */
  drainSeconds: number | null;
  /** jobs / drainSeconds. */
  deliveriesPerSecond: number | null;
  /** Per job: first call − due_at. */
  lagMs: { min: number; p50: number; p99: number; max: number } | null;
  /** Most calls (first or repeated) in any 1-second window, anywhere in the run. */
  maxPerSecond: number;
  /** The same over windows that start at least 1 s after the first call (null: drained sooner). */
  maxPerSecondAfterFirst: number | null;
  /** Calls per whole second after the due instant: [0] is [due, due + 1 s). */
  perSecond: number[];
  /** VmHWM of the scheduler just before the due instant (startup and creation), bytes. */
  peakRssBeforeDue: number | null;
  /** VmHWM of the scheduler after the drain and the settle time, bytes. */
  peakRss: number | null;
  /** VmRSS of the scheduler after the settle time, bytes. */
  rssAfter: number | null;
  /** CPU from the due instant to the last first call. */
  cpu: CpuShare;
  timedOut: boolean;
}

interface CpuSample {
  t: number;
  scheduler?: number;
  self: number;
  machine?: { busy: number; total: number };
}

function sampleCpu(pid: number): CpuSample {
  const u = process.cpuUsage();
  return { t: performance.now(), scheduler: procCpuSeconds(pid), self: (u.user + u.system) / 1e6, machine: machineCpuSeconds() };
}

function cpuShare(a: CpuSample, b: CpuSample): CpuShare {
  const dt = (b.t - a.t) / 1000;
  if (dt <= 0) return { scheduler: null, bench: null, other: null, machineBusy: null };
  const scheduler = a.scheduler !== undefined && b.scheduler !== undefined ? ((b.scheduler - a.scheduler) / dt) * 100 : null;
  const bench = ((b.self - a.self) / dt) * 100;
  let other: number | null = null;
  let machineBusy: number | null = null;
  if (a.machine && b.machine && b.machine.total > a.machine.total) {
    const busy = b.machine.busy - a.machine.busy;
    machineBusy = (busy / (b.machine.total - a.machine.total)) * 100;
    if (scheduler !== null) other = Math.max(0, (busy / dt) * 100 - scheduler - bench);
  }
  return { scheduler, bench, other, machineBusy };
}

/** Most entries of an ascending array that fit in one window [t, t + windowMs), over t ≥ from. */
export function maxInWindow(sorted: number[], windowMs: number, from = -Infinity): number {
  let best = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    if (sorted[i] < from) continue;
    if (j < i) j = i;
    while (j < sorted.length && sorted[j] < sorted[i] + windowMs) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

/**
 * Creates the herd (all due at creation start + leadMs, through POST /v1/jobs/batch), waits
 * for the due instant, then until every job has been called once (or the timeout), listens
 * settleMs more, and measures. Announces the jobs to the target as `phase`.
 */
export async function runHerd(p: {
  sched: HerdScheduler;
  target: RecordingTarget;
  settings: HerdSettings;
  phase: number;
  tag: string;
  /** Progress lines (creation, delivered so far), about one a second. */
  progress?: (line: string) => void;
}): Promise<HerdFigures> {
  const { sched, target, settings: s } = p;
  const say = p.progress ?? (() => {});
  // A schedule's rule names whole seconds.
  const dueAt = s.schedules ? Math.ceil((Date.now() + s.leadMs) / 1000) * 1000 : Date.now() + s.leadMs;
  const what = s.schedules ? `schedules (overlap ${s.schedules})` : "jobs";
  say(`${p.tag}: creating ${s.jobs} ${what}, all due at ${new Date(dueAt).toISOString()}`);
  const created = s.schedules
    ? await createSchedules({
        schedulerUrl: sched.url,
        targetUrl: target.url,
        count: s.jobs,
        at: dueAt,
        overlap: s.schedules,
        parallel: s.postConcurrency,
        tag: p.tag,
      })
    : await createJobs({
        schedulerUrl: sched.url,
        targetUrl: target.url,
        dueTimes: new Array<number>(s.jobs).fill(dueAt),
        batch: s.batch,
        parallel: s.postConcurrency,
        tag: p.tag,
      });
  target.expect(p.phase, created.due.keys());
  const createSeconds = (created.endedAt - created.startedAt) / 1000;
  say(
    `${p.tag}: created in ${createSeconds.toFixed(2)} s (${Math.round(s.jobs / createSeconds)} ${what}/s), ${((dueAt - created.endedAt) / 1000).toFixed(2)} s before the due instant`,
  );

  while (Date.now() < dueAt - 5) {
    sched.assertAlive();
    await Bun.sleep(Math.min(50, Math.max(1, dueAt - 5 - Date.now())));
  }
  const peakRssBeforeDue = procMemoryBytes(sched.pid, "VmHWM") ?? null;
  while (Date.now() < dueAt) await Bun.sleep(1);
  const cpuStart = sampleCpu(sched.pid);
  const deadline = dueAt + s.timeoutMs;
  let timedOut = false;
  let lastPrint = Date.now();
  let lastCount = 0;
  while (target.delivered(p.phase) < s.jobs) {
    sched.assertAlive();
    const now = Date.now();
    if (now > deadline) {
      timedOut = true;
      say(`${p.tag}: timed out after ${s.timeoutMs / 1000} s with ${target.delivered(p.phase)}/${s.jobs} delivered`);
      break;
    }
    if (now - lastPrint >= 1000) {
      const count = target.delivered(p.phase);
      const rss = procMemoryBytes(sched.pid, "VmRSS");
      say(
        `${p.tag}: ${count}/${s.jobs} delivered (+${Math.round(((count - lastCount) * 1000) / (now - lastPrint))}/s)${rss ? `, scheduler RSS ${mib(rss)} MiB` : ""}`,
      );
      lastPrint = now;
      lastCount = count;
    }
    await Bun.sleep(10);
  }
  const cpuEnd = sampleCpu(sched.pid);
  say(`${p.tag}: ${target.delivered(p.phase)}/${s.jobs} delivered; listening ${s.settleMs} ms more for repeated calls`);
  await Bun.sleep(s.settleMs);
  sched.assertAlive();
  const peakRss = procMemoryBytes(sched.pid, "VmHWM") ?? null;
  const rssAfter = procMemoryBytes(sched.pid, "VmRSS") ?? null;
  return { ...herdFigures(created, target, dueAt), createSeconds, peakRssBeforeDue, peakRss, rssAfter, cpu: cpuShare(cpuStart, cpuEnd), timedOut };
}

function herdFigures(created: Created, target: RecordingTarget, requestedDueAt: number) {
  let dueMs = Infinity;
  let lastCall = -Infinity;
  let duplicates = 0;
  let early = 0;
  let headerMismatch = 0;
  const lags: number[] = [];
  const all: number[] = [];
  for (const [id, due] of created.due) {
    if (due < dueMs) dueMs = due;
    const calls = target.arrivals.get(id);
    if (!calls) continue;
    duplicates += calls.length - 1;
    for (const at of calls) {
      if (at < due) early++;
      all.push(at);
    }
    if (target.scheduledFor.get(id) !== due) headerMismatch++;
    lags.push(calls[0] - due);
    if (calls[0] > lastCall) lastCall = calls[0];
  }
  if (!Number.isFinite(dueMs)) dueMs = requestedDueAt;
  lags.sort((a, b) => a - b);
  all.sort((a, b) => a - b);
  const delivered = lags.length;
  const drain = delivered > 0 ? Math.max(0.001, (lastCall - dueMs) / 1000) : null;
  const perSecond: number[] = [];
  for (const at of all) {
    const k = Math.max(0, Math.floor((at - dueMs) / 1000));
    while (perSecond.length <= k) perSecond.push(0);
    perSecond[k]++;
  }
  const afterFirst = all.length > 0 && all[all.length - 1] >= all[0] + 2000 ? maxInWindow(all, 1000, all[0] + 1000) : null;
  return {
    jobs: created.due.size,
    dueAt: new Date(dueMs).toISOString(),
    slackMs: dueMs - created.endedAt,
    createdLate: created.createdLate,
    delivered,
    missing: created.due.size - delivered,
    duplicates,
    early,
    earlyByHeader: target.beforeScheduledFor,
    headerMismatch,
    drainSeconds: drain,
    deliveriesPerSecond: drain ? created.due.size / drain : null,
    lagMs: delivered > 0 ? { min: lags[0], p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags[lags.length - 1] } : null,
    maxPerSecond: maxInWindow(all, 1000),
    maxPerSecondAfterFirst: afterFirst,
    perSecond,
  };
}

export const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
