import type { Analysis } from "./analyze.ts";

export interface MachineInfo {
  cpu_model: string;
  cores: number;
  memory_gb: number;
  os: string;
  bun: string;
}

export interface DrillReport extends Analysis {
  drill: "failover";
  sync: boolean;
  jobs_requested: number;
  started_at: string;
  finished_at: string;
  /** Generation of the authority before the kill (region A's GET /v1/cluster) and after takeover (B's). */
  generation_before: number | null;
  generation_after: number | null;
  /** Kill → pg_is_in_recovery() false on the standby. */
  promote_ms: number | null;
  /** Kill → region B logged "took over region authority". */
  takeover_ms: number | null;
  /** What B logged when it took over: from, to, generation. */
  takeover: { from: unknown; to: unknown; generation: unknown } | null;
  create_requests: number;
  /** Create answers other than 200/201, by kind (connection, 409-replay, 503, …). */
  create_retries: Record<string, number>;
  /** Duration of each phase, in order. */
  phases_ms: Record<string, number>;
  postgres: { version: string; bin: string };
  machine: MachineInfo;
  notes: string[];
  /** Why the drill could not finish, when it could not (then passed is false). */
  error: string | null;
  /** Scheduler and PostgreSQL logs, kept when the drill did not pass. */
  logs_dir: string | null;
}

type Row = [label: string, value: string, verdict?: "ok" | "FAIL" | ""];

const n = (x: number | null | undefined) => (x === null || x === undefined ? "—" : String(x));
const ms = (x: number | null | undefined) => (x === null || x === undefined ? "—" : `${x} ms`);
const check = (good: boolean): "ok" | "FAIL" => (good ? "ok" : "FAIL");

/** The report as a readable table (stdout). */
export function formatReport(r: DrillReport): string {
  const head =
    `scheduler drill failover: ${r.passed ? "PASSED" : "FAILED"}` +
    `  (${r.sync ? "synchronous" : "asynchronous"} replication, ${r.jobs_requested} jobs, PostgreSQL ${r.postgres.version || "?"}, ` +
    `${r.machine.cpu_model} × ${r.machine.cores})`;
  const rows: Row[] = [
    ["jobs created", n(r.jobs_created)],
    ["jobs acknowledged (201/200)", n(r.jobs_acknowledged)],
    ["jobs delivered (accepted by the target)", n(r.jobs_delivered)],
    ["lost (acknowledged, never accepted)", n(r.lost), check(r.lost === 0)],
    ["duplicates accepted", n(r.duplicates_accepted), check(r.duplicates_accepted === 0)],
    ["redelivered after the crash (at-least-once)", n(r.redelivered_after_crash)],
    ["early (accepted before Scheduler-Scheduled-For)", n(r.early), check(r.early === 0)],
    ["stale calls refused (older fencing token)", n(r.stale_refused)],
    ["old home's calls after it came back", n(r.old_region_calls)],
    ["  of which accepted", n(r.old_region_accepted), check(r.old_region_accepted === 0)],
    ["due before the kill", n(r.due_before_kill)],
    ["due during the outage", n(r.outage_due)],
    ["  of which delivered late", n(r.outage_due_delivered), check(r.outage_due_delivered === r.outage_due)],
    ["schedule catch-up runs (fire_once: at most 1)", n(r.catchup_runs), check(r.catchup_runs <= 1)],
    ["schedule ticks after takeover", n(r.ticks_after_takeover), check(r.ticks_after_takeover >= 1)],
    ["misfire policy kept", r.misfire_ok ? "yes" : "no", check(r.misfire_ok)],
    ["generation before → after", `${n(r.generation_before)} → ${n(r.generation_after)}`],
    ["kill → standby promoted", ms(r.promote_ms)],
    ["kill → region b took over authority", ms(r.takeover_ms)],
    ["RTO: kill → first call accepted from region b", ms(r.rto_ms)],
    [
      "delivery lag p50 / p95 / max (due → accepted)",
      r.delivery_lag_ms ? `${r.delivery_lag_ms.p50} / ${r.delivery_lag_ms.p95} / ${r.delivery_lag_ms.max} ms` : "—",
    ],
    ["calls to the target (accepted / total)", `${r.calls_accepted} / ${r.calls_total}`],
    [
      "create requests (retried: " +
        (Object.entries(r.create_retries)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "none") +
        ")",
      n(r.create_requests),
    ],
  ];
  const w = Math.max(...rows.map((x) => x[0].length));
  const vw = Math.max(...rows.map((x) => x[1].length));
  const lines = [head, ""];
  for (const [label, value, verdict] of rows) lines.push(`  ${label.padEnd(w)}  ${value.padStart(vw)}${verdict ? `  ${verdict}` : ""}`.trimEnd());
  const phases = Object.entries(r.phases_ms);
  if (phases.length) {
    lines.push("", "  phases:");
    const pw = Math.max(...phases.map(([k]) => k.length));
    for (const [k, v] of phases) lines.push(`    ${k.padEnd(pw)}  ${String(v).padStart(6)} ms`);
  }
  if (r.lost_keys.length) lines.push("", `  lost: ${r.lost_keys.join(", ")}`);
  if (r.duplicate_keys.length) lines.push("", `  duplicates: ${r.duplicate_keys.join(", ")}`);
  if (r.early_keys.length) lines.push("", `  early: ${r.early_keys.join(", ")}`);
  if (r.notes.length) {
    lines.push("", "  notes:");
    for (const note of r.notes) lines.push(...wrap(note, 92).map((l, i) => `    ${i === 0 ? "- " : "  "}${l}`));
  }
  if (r.error) lines.push("", `  error: ${r.error}`);
  if (r.logs_dir) lines.push("", `  logs kept in ${r.logs_dir}`);
  return `${lines.join("\n")}\n`;
}

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(line);
  return out;
}
