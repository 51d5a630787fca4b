// One job's page: its fields, its attempt log as GET /v1/jobs/:id returns it, and the actions
// an operator takes on it (cancel, replay when dead). Outcomes are shown as the API names
// them, whatever they are.
import { badge, fill, h, num, table, when } from "./dom.js";
import { duration } from "./health.js";
import { overviewHref } from "./route.js";

const LIVE = ["scheduled", "queued", "running"];

const ms = (a, b) => (a && b ? Date.parse(b) - Date.parse(a) : null);
const took = (x) => (x === null ? "—" : duration(x / 1000));

/** The attempt's flags: what the outcome alone does not say. */
function flags(a) {
  const out = [];
  if (a.possibly_delivered)
    out.push(h("span", { class: "badge flag-possibly", title: "no answer after the request was sent: the target may have acted on it" }, "possibly delivered"));
  if (a.verified === true)
    out.push(h("span", { class: "badge flag-verified", title: "the target's verify endpoint said it processed the call: no second call" }, "verified"));
  if (a.late_outcome)
    out.push(
      h(
        "span",
        { class: "badge", title: `reported later, ${a.late_at ?? ""}` },
        `late: ${a.late_outcome}${a.late_http_status ? ` ${a.late_http_status}` : ""}`,
      ),
    );
  return out;
}

function attemptRows(log) {
  return log.map((a, i) => {
    const prev = i > 0 ? log[i - 1] : null;
    return h(
      "tr",
      { "data-attempt": a.number, "data-outcome": a.outcome },
      h("td", { class: "num" }, a.number),
      h("td", {}, h("code", { title: a.attempt_id }, a.attempt_id.slice(-12))),
      h("td", {}, when(a.started_at)),
      h("td", { class: "num took" }, took(ms(a.started_at, a.finished_at))),
      h("td", { class: "num" }, prev ? took(ms(prev.finished_at ?? prev.started_at, a.started_at)) : "—"),
      h("td", {}, badge(a.outcome, "o")),
      h("td", { class: "num" }, a.http_status ?? "—"),
      h("td", { class: "num fencing" }, a.epoch === null ? "—" : num(a.epoch)),
      h("td", {}, h("code", {}, a.worker ?? "—")),
      h("td", { class: "flags" }, flags(a)),
      h("td", { class: "err" }, a.error ?? ""),
    );
  });
}

/** An inline form: why (for the audit log), a confirm button, and a way out. */
function actionForm(kind, label, ui, extra) {
  const input = h("input", {
    class: "action-reason",
    placeholder: kind === "cancel" ? "why (optional, kept in the audit log)" : "why (kept in the audit log)",
    size: 40,
    required: kind !== "cancel",
  });
  queueMicrotask(() => input.focus());
  return h(
    "form",
    {
      class: "inline",
      "data-action": kind,
      onsubmit: (e) => {
        e.preventDefault();
        ui.onAction(kind, input.value.trim(), e.target);
      },
    },
    input,
    extra,
    h("button", { type: "submit", class: "action-confirm" }, label),
    h("button", { type: "button", onclick: () => ui.onOpen(null) }, "Close"),
  );
}

/**
 * ui.open: the action whose form is open ("cancel" | "replay" | null); ui.onOpen(kind) opens
 * one; ui.onAction(kind, reason, form) does it; ui.message / ui.error: the last answer.
 */
export function renderJobPage(job, ui) {
  fill("job-id", job.id);
  fill(
    "job-status",
    badge(job.status),
    job.cancel_requested && job.status === "running" ? h("span", { class: "badge s-cancelled" }, "cancel requested") : null,
  );
  const buttons = [];
  if (LIVE.includes(job.status) && !job.cancel_requested)
    buttons.push(h("button", { type: "button", class: "open-cancel", onclick: () => ui.onOpen("cancel") }, "Cancel job…"));
  if (job.status === "dead") buttons.push(h("button", { type: "button", class: "open-replay", onclick: () => ui.onOpen("replay") }, "Replay…"));
  fill(
    "job-actions",
    h("div", { class: "inline" }, buttons),
    ui.open === "cancel" ? actionForm("cancel", job.status === "running" ? "Cancel now (aborts the call)" : "Cancel now", ui) : null,
    ui.open === "replay"
      ? actionForm("replay", "Replay now", ui, h("label", {}, h("input", { type: "checkbox", class: "replay-force" }), " force (if quarantined)"))
      : null,
    ui.error ? h("p", { class: "error action-error" }, ui.error) : null,
    ui.message ? h("p", { class: "ok action-done" }, ui.message) : null,
  );
  const row = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
  const t = job.target;
  fill(
    "job-fields",
    row("tenant", h("a", { href: overviewHref({ tenant: job.tenant }) }, job.tenant)),
    job.schedule_id
      ? row(
          "schedule",
          h(
            "span",
            {},
            h("a", { href: overviewHref({ schedule_id: job.schedule_id, tenant: job.tenant }) }, job.schedule_id),
            " occurrence of ",
            when(job.nominal_time),
          ),
        )
      : null,
    row("target", h("code", { class: "url" }, `${t.method} ${t.url}`)),
    row("due", when(job.due_at)),
    row("calls", `${num(job.attempts)} (at most ${num(job.retry.max_attempts)} tries; backoff ${job.retry.base} … ${job.retry.max}; timeout ${job.timeout})`),
    row("fencing token", job.epoch === null ? "—" : h("b", { class: "fencing" }, num(job.epoch))),
    row("version", num(job.version)),
    row("idempotency key", job.idempotency_key ? h("code", {}, job.idempotency_key) : "—"),
    job.dead_reason ? row("dead reason", h("span", { class: "err" }, job.dead_reason)) : null,
    row("replays", num(job.replays)),
    job.last_error ? row("last error", h("span", { class: "err" }, job.last_error)) : null,
    row("created", when(job.created_at)),
    row("updated", when(job.updated_at)),
    row("finished", when(job.finished_at)),
  );
  fill(
    "attempts-table",
    table(
      ["#", "attempt", "started", "took", "after previous", "outcome", "HTTP", "fencing token", "worker", "flags", "error"],
      attemptRows(job.attempt_log ?? []),
      "no calls yet",
    ),
  );
}

/** The job could not be read: say why in place of its page. */
export function renderJobMissing(id, err) {
  fill("job-id", id);
  fill("job-status");
  fill("job-actions", h("p", { class: "error job-error" }, String(err)));
  fill("job-fields");
  fill("attempts-table");
}
