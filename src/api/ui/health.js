// The health verdict of `scheduler status` (src/obs/status-screen.ts), for the browser, which
// cannot load TypeScript. test/ui/health-parity.test.ts holds the two to the same answers.

const n = (x) => x.toLocaleString("en-US");

export function duration(s) {
  if (s === null || s === undefined) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** What is wrong, most urgent first (empty: healthy). */
export function verdict(s, nowMs = Date.parse(s.at)) {
  const out = [];
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
