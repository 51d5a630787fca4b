// One renderer per dashboard section, each from the JSON of the API call it shows.
import { barChart, columnChart, legend, lineChart } from "./charts.js";
import { badge, fill, h, num, shortId, table, when } from "./dom.js";
import { duration, verdict } from "./health.js";
import { jobHref, overviewHref } from "./route.js";

const STATUSES = ["scheduled", "queued", "running", "succeeded", "dead", "cancelled", "expired"];
const OUTCOMES = ["success", "throttled", "transient", "unknown", "permanent"];

export function renderHealth(s) {
  const v = verdict(s);
  fill("verdict", v.length === 0 ? h("li", { class: "ok" }, "OK — nothing needs attention") : v.map((w) => h("li", { class: "warn" }, w)));
  fill(
    "job-counts",
    STATUSES.map((st) => h("div", { class: "count" }, h("b", { "data-status": st }, num(s.jobs[st])), badge(st))),
    h("div", { class: "count" }, h("b", {}, num(s.due_backlog)), h("span", {}, "due backlog")),
    h("div", { class: "count" }, h("b", {}, num(s.overdue)), h("span", {}, `overdue > ${s.overdue_after_seconds} s`)),
    h("div", { class: "count" }, h("b", {}, duration(s.oldest_due_age_seconds)), h("span", {}, "oldest due")),
  );
}

export function renderCluster(c) {
  if (!c) return fill("cluster", h("p", { class: "muted" }, "no region authority yet"));
  const row = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
  fill(
    "cluster",
    row("region", h("span", {}, c.region, " ", h("span", { class: `badge role-${c.role}` }, c.role))),
    row("home region", c.home_region),
    row("generation", num(c.generation)),
    row("epoch", h("b", { id: "epoch" }, num(c.epoch))),
    row("leader", c.leader ?? h("span", { class: "warn-text" }, "none")),
    row("lease until", when(c.lease_until)),
  );
}

export function renderBacklog(history, scoped) {
  const note = document.getElementById("history-note");
  if (scoped) {
    note.textContent = "";
    return fill("backlog-chart", h("p", { class: "muted" }, "the history is cluster-wide: it needs a token for all tenants (*)"));
  }
  note.textContent = history.length ? `last ${duration((Date.parse(history.at(-1).at) - Date.parse(history[0].at)) / 1000)}` : "";
  if (history.length < 2) return fill("backlog-chart", h("p", { class: "muted" }, "collecting samples (every SCHEDULER_STATS_INTERVAL)…"));
  const series = [
    { name: "due backlog", cls: "c-backlog", values: history.map((x) => x.due_backlog) },
    { name: "queue depth", cls: "c-queue", values: history.map((x) => x.queue_depth) },
    { name: "running", cls: "c-running", values: history.map((x) => x.running) },
  ];
  fill(
    "backlog-chart",
    lineChart(
      history.map((x) => x.at),
      series,
    ),
    legend(series),
  );
}

export function renderThroughput(recent) {
  document.getElementById("window-note").textContent = `last ${duration(recent.window_seconds)}`;
  const keys = [...OUTCOMES, ...Object.keys(recent.by_outcome).filter((k) => !OUTCOMES.includes(k))];
  fill("outcome-chart", barChart(keys.map((k) => ({ label: k, value: recent.by_outcome[k] ?? 0, cls: `c-${k}` }))));
}

const bound = (s) => (s < 1 ? `${Math.round(s * 1000)}ms` : s < 60 ? `${s}s` : `${s / 60}m`);

export function renderLag(recent) {
  const l = recent.start_lag;
  fill(
    "lag-figures",
    [
      ["p50", l.p50],
      ["p90", l.p90],
      ["p99", l.p99],
      ["max", l.max],
    ].map(([k, v]) => h("div", { class: "count" }, h("b", { "data-lag": k }, duration(v)), h("span", {}, k))),
    h("div", { class: "count" }, h("b", {}, num(l.count)), h("span", {}, "first calls")),
  );
  const hist = recent.lag_histogram;
  fill("lag-chart", columnChart(hist.map((b, i) => ({ label: b.le === null ? `>${bound(hist[i - 1].le)}` : `≤${bound(b.le)}`, value: b.count }))));
}

export function renderTenants(list, scoped) {
  if (scoped) return fill("tenant-chart", h("p", { class: "muted" }, "needs a token for all tenants (*)"));
  if (list.length === 0) return fill("tenant-chart", h("p", { class: "muted" }, "no tenant has jobs due"));
  fill("tenant-chart", barChart(list.map((t) => ({ label: t.tenant, value: t.due_backlog, cls: "c-backlog" }))));
}

/** The job list; page: { cursor, next } (this page's cursor, the API's next_cursor). */
export function renderJobs(items, filters, page) {
  const filtered = Object.keys(filters).length > 0;
  const pager =
    page.cursor || page.next
      ? h(
          "p",
          { class: "pager" },
          page.cursor ? h("a", { href: overviewHref(filters), class: "newest" }, "← newest") : null,
          " ",
          page.next ? h("a", { href: overviewHref(filters, page.next), class: "older" }, "older →") : null,
        )
      : null;
  fill(
    "jobs-table",
    table(
      ["job", "tenant", "schedule", "status", "due", "calls", "target", "last error"],
      items.map((j) =>
        h(
          "tr",
          { "data-job": j.id },
          h("td", {}, h("a", { href: jobHref(j.id), class: "job-link" }, shortId(j.id))),
          h("td", {}, h("a", { href: overviewHref({ ...filters, tenant: j.tenant }) }, j.tenant)),
          h("td", {}, j.schedule_id ? h("a", { href: overviewHref({ ...filters, schedule_id: j.schedule_id, tenant: j.tenant }) }, j.schedule_id) : ""),
          h("td", {}, badge(j.status)),
          h("td", {}, when(j.due_at)),
          h("td", { class: "num" }, j.attempts),
          h("td", { class: "url" }, `${j.target.method} ${j.target.url}`),
          h("td", { class: "err" }, j.last_error ?? ""),
        ),
      ),
      filtered ? "no jobs match these filters" : "no jobs yet",
    ),
    pager,
  );
}

/**
 * The dead letters. ui.replaying is the id whose reason form is open; ui.onReplay(job, reason)
 * replays, ui.onOpen(id | null) opens or closes a row's form; ui.errors[id] is a failed
 * replay's message.
 */
export function renderDlq(items, ui) {
  const rows = items.flatMap((j) => {
    const row = h(
      "tr",
      { "data-dead": j.id },
      h("td", {}, h("a", { href: jobHref(j.id) }, shortId(j.id))),
      h("td", {}, j.tenant),
      h(
        "td",
        { class: "err" },
        j.reason ?? "",
        j.failure_signature ? h("div", { class: "muted" }, j.failure_signature, j.same_failure_count > 1 ? ` ×${j.same_failure_count}` : "") : null,
      ),
      h("td", { class: "err" }, j.last_error ?? ""),
      h("td", {}, when(j.dead_at)),
      h("td", { class: "num" }, j.replays),
      h("td", {}, j.quarantined ? h("span", { class: "badge s-dead" }, "quarantined") : "no"),
      h("td", {}, h("button", { type: "button", class: "replay", onclick: () => ui.onOpen(j.id) }, "Replay…")),
    );
    const out = [row];
    if (ui.replaying === j.id) {
      const input = h("input", { class: "replay-reason", placeholder: "why (kept in the audit log)", size: 40, required: true });
      const form = h(
        "form",
        {
          class: "inline",
          onsubmit: (e) => {
            e.preventDefault();
            ui.onReplay(j, input.value);
          },
        },
        input,
        j.quarantined ? h("label", {}, h("input", { type: "checkbox", class: "replay-force" }), " force (quarantined)") : null,
        h("button", { type: "submit", class: "replay-confirm" }, "Replay now"),
        h("button", { type: "button", onclick: () => ui.onOpen(null) }, "Cancel"),
      );
      out.push(h("tr", { class: "form-row" }, h("td", { colspan: 8 }, form)));
      queueMicrotask(() => input.focus());
    }
    if (ui.errors[j.id]) out.push(h("tr", { class: "form-row" }, h("td", { colspan: 8, class: "error replay-error" }, ui.errors[j.id])));
    return out;
  });
  fill("dlq-table", table(["job", "tenant", "reason", "last error", "dead at", "replays", "quarantined", ""], rows, "no dead jobs"));
}

/**
 * Schedules. v.previews[key] holds the fire instants asked for with the Preview button
 * (v.onPreview(sc)); v.pausing is the key whose pause form is open (v.onPauseOpen(key | null)),
 * v.onPause(sc, reason) and v.onResume(sc) act; v.errors[key] is a refused action's message.
 */
export function renderSchedules(items, v) {
  const rows = items.flatMap((sc) => {
    const key = `${sc.tenant}/${sc.id}`;
    const action = sc.paused
      ? h("button", { type: "button", class: "resume", onclick: () => v.onResume(sc) }, "Resume")
      : h("button", { type: "button", class: "pause", onclick: () => v.onPauseOpen(key) }, "Pause…");
    const out = [
      h(
        "tr",
        { "data-schedule": sc.id, "data-tenant": sc.tenant },
        h("td", {}, h("code", {}, sc.id)),
        h("td", {}, sc.tenant),
        h("td", {}, h("code", {}, sc.cron)),
        h("td", {}, sc.timezone),
        h(
          "td",
          { class: "state" },
          sc.paused ? h("span", { class: "badge s-cancelled", title: sc.paused_reason ?? "" }, "paused") : "active",
          sc.paused && sc.paused_reason ? h("div", { class: "muted paused-reason" }, sc.paused_reason) : null,
        ),
        h("td", {}, sc.next_fire_local ?? "—"),
        h(
          "td",
          { class: "actions" },
          h("a", { href: overviewHref({ schedule_id: sc.id, tenant: sc.tenant }), class: "schedule-jobs" }, "jobs"),
          " ",
          h("button", { type: "button", class: "preview", onclick: () => v.onPreview(sc) }, v.previews[key] ? "Hide" : "Preview"),
          " ",
          action,
        ),
      ),
    ];
    if (v.pausing === key) {
      const input = h("input", { class: "pause-reason", placeholder: "why (optional; shown as the pause reason)", size: 40 });
      queueMicrotask(() => input.focus());
      out.push(
        h(
          "tr",
          { class: "form-row" },
          h(
            "td",
            { colspan: 7 },
            h(
              "form",
              {
                class: "inline",
                onsubmit: (e) => {
                  e.preventDefault();
                  v.onPause(sc, input.value.trim());
                },
              },
              input,
              h("button", { type: "submit", class: "pause-confirm" }, "Pause now"),
              h("button", { type: "button", onclick: () => v.onPauseOpen(null) }, "Close"),
            ),
          ),
        ),
      );
    }
    if (v.errors[key]) out.push(h("tr", { class: "form-row" }, h("td", { colspan: 7, class: "error schedule-error" }, v.errors[key])));
    const p = v.previews[key];
    if (p) {
      const body =
        typeof p === "string"
          ? h("p", { class: "error" }, p)
          : h(
              "ol",
              { class: "preview-list" },
              p.map((x) => h("li", {}, h("code", { class: "local" }, x.local), h("span", { class: "muted" }, ` ${x.at}`))),
            );
      out.push(h("tr", { class: "form-row" }, h("td", { colspan: 7 }, body)));
    }
    return out;
  });
  fill("schedules-table", table(["schedule", "tenant", "cron", "timezone", "state", "next fire (local)", ""], rows, "no schedules"));
}
