/**
 * `scheduler status`: the health facts of GET /v1/stats on one terminal screen, with a verdict
 * and what to look at next. Reads the API (the embedded database is locked by the running
 * scheduler, and the API is what operators can reach).
 */

interface StatsBody {
  at: string;
  tenant: string | null;
  jobs: Record<string, number>;
  due_backlog: number;
  overdue: number;
  overdue_after_seconds: number;
  oldest_due_age_seconds: number;
  queue_depth: number;
  dlq: { jobs: number; oldest_age_seconds: number };
  recent: {
    window_seconds: number;
    by_outcome: Record<string, number>;
    start_lag: { p50: number | null; p99: number | null; max: number | null; count: number };
  };
  tenants_due_backlog: { tenant: string; due_backlog: number }[];
  cluster: { region: string; home_region: string; role: string; generation: number; epoch: number; leader: string | null; lease_until: string } | null;
}

export class StatusError extends Error {
  override readonly name = "StatusError";
}

/** Fetches the stats; a failure is one line that says what to do. */
export async function fetchStats(url: string, token: string | undefined): Promise<StatsBody> {
  let res: Response;
  try {
    res = await fetch(`${url.replace(/\/$/, "")}/v1/stats`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(5000),
    });
  } catch (err) {
    throw new StatusError(`cannot reach the scheduler at ${url} (${(err as Error).message}); is it running? Give its address with --url=http://host:port`);
  }
  if (res.status === 401 || res.status === 403) {
    throw new StatusError(`the scheduler at ${url} refused the request (${res.status}); pass a token with jobs:read scope in SCHEDULER_TOKEN or --token`);
  }
  if (!res.ok) throw new StatusError(`the scheduler at ${url} answered ${res.status} to GET /v1/stats: ${(await res.text()).slice(0, 200)}`);
  return (await res.json()) as StatsBody;
}

const n = (x: number) => x.toLocaleString("en-US");

export function duration(s: number | null): string {
  if (s === null) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** What is wrong, most urgent first (empty: healthy). */
export function verdict(s: StatsBody, nowMs = Date.parse(s.at)): string[] {
  const out: string[] = [];
  const c = s.cluster;
  if (!c) out.push("no region authority yet: no scheduler has started on this database");
  else if (c.role === "home" && (!c.leader || Date.parse(c.lease_until) < nowMs)) {
    out.push("no dispatch leader holds the lease: nothing is being dispatched; start a dispatcher (--mode=dispatcher or all)");
  }
  if (s.overdue > 0)
    out.push(
      `${n(s.overdue)} job(s) due more than ${s.overdue_after_seconds} s ago and not dispatched: dispatchers are down or too few (see scheduler_scheduling_lag_seconds)`,
    );
  if (s.queue_depth > 0 && (s.jobs.running ?? 0) === 0 && s.oldest_due_age_seconds > 10)
    out.push("jobs wait in the queue and none run: are any workers up in the home region?");
  if (s.dlq.jobs > 0)
    out.push(`${n(s.dlq.jobs)} dead job(s), the oldest died ${duration(s.dlq.oldest_age_seconds)} ago: GET /v1/dlq, replay with POST /v1/dlq/:id/replay`);
  return out;
}

export function renderStatus(url: string, s: StatsBody): string {
  const L: string[] = [];
  const c = s.cluster;
  L.push(`scheduler status — ${url}${s.tenant ? ` (tenant ${s.tenant})` : ""} at ${s.at}`);
  L.push("");
  if (c) {
    L.push(`region     ${c.region} (${c.role})   home ${c.home_region}   generation ${c.generation}   epoch ${c.epoch}`);
    L.push(`leader     ${c.leader ?? "none"}   lease until ${c.lease_until}`);
  }
  const j = s.jobs;
  L.push(
    `jobs       scheduled ${n(j.scheduled ?? 0)}   queued ${n(j.queued ?? 0)}   running ${n(j.running ?? 0)}   succeeded ${n(j.succeeded ?? 0)}   dead ${n(j.dead ?? 0)}   cancelled ${n(j.cancelled ?? 0)}   expired ${n(j.expired ?? 0)}`,
  );
  L.push(`backlog    due ${n(s.due_backlog)}   overdue ${n(s.overdue)}   oldest due ${duration(s.oldest_due_age_seconds)}   queue depth ${n(s.queue_depth)}`);
  L.push(`dead       ${n(s.dlq.jobs)}${s.dlq.jobs ? `, oldest ${duration(s.dlq.oldest_age_seconds)} ago` : ""}`);
  const r = s.recent;
  const outcomes =
    Object.entries(r.by_outcome)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${n(v)}`)
      .join("   ") || "no calls";
  L.push(`last ${duration(r.window_seconds).replace(".0 s", "s")}  ${outcomes}`);
  L.push(
    `start lag  p50 ${duration(r.start_lag.p50)}   p99 ${duration(r.start_lag.p99)}   max ${duration(r.start_lag.max)}   (${n(r.start_lag.count)} first calls)`,
  );
  if (s.tenants_due_backlog.length > 0) L.push(`tenants    ${s.tenants_due_backlog.map((t) => `${t.tenant} ${n(t.due_backlog)}`).join(", ")} (due backlog)`);
  L.push("");
  const v = verdict(s);
  if (v.length === 0) L.push("health     OK");
  else for (const [i, w] of v.entries()) L.push(`${i === 0 ? "health     " : "           "}WARN ${w}`);
  return `${L.join("\n")}\n`;
}
