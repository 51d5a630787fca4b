// The dashboard: reads the same JSON API as any user, with the token pasted into the page,
// and redraws every few seconds. Two views (route.js): the overview, and one job's page.
import { call, token } from "./api.js";
import { fill, h } from "./dom.js";
import { renderJobMissing, renderJobPage } from "./job-page.js";
import { currentRoute, jobsPath, overviewHref } from "./route.js";
import { renderBacklog, renderCluster, renderDlq, renderHealth, renderJobs, renderLag, renderSchedules, renderTenants, renderThroughput } from "./sections.js";

const REFRESH_MS = 3000;
const PREVIEW_N = 8;

const state = { dlq: [], schedules: [], previews: {}, job: null, overview: "#/" };
const ui = {
  replaying: null,
  errors: {},
  onOpen(id) {
    ui.replaying = id;
    renderDlq(state.dlq, ui);
  },
  async onReplay(job, reason) {
    const force = document.querySelector(`tr.form-row .replay-force`)?.checked ?? false;
    try {
      const replayed = await call("POST", `/v1/dlq/${job.id}/replay`, { reason, ...(force ? { force } : {}) });
      delete ui.errors[job.id];
      ui.replaying = null;
      document.getElementById("dlq-note").textContent = `replayed ${job.id}: now ${replayed.status}`;
      await refresh();
    } catch (err) {
      ui.errors[job.id] = String(err);
      renderDlq(state.dlq, ui);
    }
  },
};

/** Schedules: the preview, and pause (with an optional reason) / resume. */
const sv = {
  previews: state.previews,
  pausing: null,
  errors: {},
  onPreview: preview,
  onPauseOpen(key) {
    sv.pausing = key;
    renderSchedules(state.schedules, sv);
  },
  onPause: (sc, reason) => scheduleAction(sc, "pause", reason ? { reason } : {}),
  onResume: (sc) => scheduleAction(sc, "resume", {}),
};

async function scheduleAction(sc, verb, body) {
  const key = `${sc.tenant}/${sc.id}`;
  try {
    await call("POST", `/v1/schedules/${encodeURIComponent(sc.id)}/${verb}?tenant=${encodeURIComponent(sc.tenant)}`, body);
    delete sv.errors[key];
    sv.pausing = null;
    await refresh();
  } catch (err) {
    sv.errors[key] = String(err);
    renderSchedules(state.schedules, sv);
  }
}

/** The job page's actions. open: the action whose form is open; message/error: the last answer. */
const jv = {
  open: null,
  message: null,
  error: null,
  onOpen(kind) {
    jv.open = kind;
    jv.error = null;
    jv.message = null;
    if (state.job) renderJobPage(state.job, jv);
  },
  async onAction(kind, reason, form) {
    const id = state.job.id;
    const force = form.querySelector(".replay-force")?.checked ?? false;
    try {
      const job =
        kind === "cancel"
          ? await call("POST", `/v1/jobs/${encodeURIComponent(id)}/cancel`, reason ? { reason } : {})
          : await call("POST", `/v1/dlq/${encodeURIComponent(id)}/replay`, { reason, ...(force ? { force } : {}) });
      jv.open = null;
      jv.error = null;
      jv.message =
        kind === "cancel"
          ? job.status === "running"
            ? "cancel requested: the call is being aborted; the job ends cancelled when its worker stops"
            : `cancelled (${job.status})`
          : `replayed: now ${job.status}`;
      await refresh();
    } catch (err) {
      jv.error = String(err);
      if (state.job) renderJobPage(state.job, jv);
    }
  },
};

function showErrors(errors) {
  const banner = document.getElementById("auth-error");
  if (errors.length === 0) {
    banner.hidden = true;
    return;
  }
  const e = errors.find((x) => x.auth) ?? errors[0];
  const hint =
    e.status === 401
      ? "Paste a valid token above (SCHEDULER_TOKENS)."
      : e.status === 403
        ? "This token may not read this; it needs the jobs:read scope (admin to replay)."
        : "";
  fill("auth-error", h("b", {}, String(e)), " ", hint);
  banner.hidden = false;
}

async function refresh() {
  const route = currentRoute();
  document.getElementById("overview").hidden = route.page !== "overview";
  document.getElementById("job-page").hidden = route.page !== "job";
  if (route.page === "job") await refreshJob(route.id);
  else await refreshOverview(route.filters, route.cursor);
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString("en-GB")}`;
}

async function refreshJob(id) {
  document.getElementById("back").setAttribute("href", state.overview);
  try {
    const job = await call("GET", `/v1/jobs/${encodeURIComponent(id)}`);
    showErrors([]);
    state.job = job;
    // An open reason form would lose what is being typed.
    if (!jv.open) renderJobPage(job, jv);
  } catch (err) {
    state.job = null;
    showErrors(err.auth ? [err] : []);
    renderJobMissing(id, err);
  }
}

async function refreshOverview(filters, cursor) {
  showFilters(filters);
  const [stats, jobs, dlq, schedules] = await Promise.allSettled([
    call("GET", "/v1/stats"),
    call("GET", jobsPath(filters, cursor)),
    call("GET", "/v1/dlq?limit=50"),
    call("GET", "/v1/schedules?limit=50"),
  ]);
  showErrors([stats, jobs, dlq, schedules].filter((r) => r.status === "rejected").map((r) => r.reason));
  if (stats.status === "fulfilled") {
    const s = stats.value;
    const scoped = s.tenant !== null;
    renderHealth(s);
    renderCluster(s.cluster);
    renderBacklog(s.history, scoped);
    renderThroughput(s.recent);
    renderLag(s.recent);
    renderTenants(s.tenants_due_backlog, scoped);
  }
  if (jobs.status === "fulfilled") renderJobs(jobs.value.items, filters, { cursor, next: jobs.value.next_cursor });
  if (dlq.status === "fulfilled") {
    state.dlq = dlq.value.items;
    if (!ui.replaying) renderDlq(state.dlq, ui);
  }
  if (schedules.status === "fulfilled") {
    state.schedules = schedules.value.items;
    if (!sv.pausing) renderSchedules(state.schedules, sv);
  }
}

/** The filter form shows the filters in the URL (unless it is being typed into). */
function showFilters(filters) {
  const form = document.getElementById("job-filters");
  if (form.contains(document.activeElement) && document.activeElement.tagName === "INPUT") return;
  document.getElementById("filter-status").value = filters.status ?? "";
  document.getElementById("filter-tenant").value = filters.tenant ?? "";
  document.getElementById("filter-schedule").value = filters.schedule_id ?? "";
}

async function preview(sc) {
  const key = `${sc.tenant}/${sc.id}`;
  if (state.previews[key]) delete state.previews[key];
  else {
    try {
      const r = await call("GET", `/v1/schedules/${encodeURIComponent(sc.id)}?preview=${PREVIEW_N}&tenant=${encodeURIComponent(sc.tenant)}`);
      state.previews[key] = r.preview ?? [];
    } catch (err) {
      state.previews[key] = String(err);
    }
  }
  renderSchedules(state.schedules, sv);
}

async function createJob(e) {
  e.preventDefault();
  const url = document.getElementById("create-url").value.trim();
  const delay = document.getElementById("create-delay").value.trim();
  const tenant = document.getElementById("create-tenant").value.trim();
  const out = document.getElementById("create-result");
  try {
    const job = await call("POST", "/v1/jobs", { target: { url, method: "POST" }, ...(delay ? { delay } : {}), ...(tenant ? { tenant } : {}) });
    out.className = "ok";
    out.textContent = `created job ${job.id} (${job.status}, due ${job.due_at})`;
    out.dataset.job = job.id;
    await refresh();
  } catch (err) {
    out.className = "error";
    out.textContent = String(err);
  }
}

function applyFilters(e) {
  e.preventDefault();
  location.hash = overviewHref({
    status: document.getElementById("filter-status").value,
    tenant: document.getElementById("filter-tenant").value.trim(),
    schedule_id: document.getElementById("filter-schedule").value.trim(),
  });
}

async function loop() {
  try {
    await refresh();
  } catch (err) {
    showErrors([err]);
  }
  setTimeout(loop, REFRESH_MS);
}

document.getElementById("token").value = token.get();
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token.set(document.getElementById("token").value.trim());
  refresh();
});
document.getElementById("create-form").addEventListener("submit", createJob);
document.getElementById("job-filters").addEventListener("submit", applyFilters);
document.getElementById("filter-status").addEventListener("change", applyFilters);
document.getElementById("filter-clear").addEventListener("click", () => {
  location.hash = overviewHref({});
});
window.addEventListener("hashchange", () => {
  const route = currentRoute();
  if (route.page === "overview") state.overview = location.hash || "#/";
  else {
    jv.open = null;
    jv.message = null;
    jv.error = null;
    state.job = null;
  }
  refresh().catch((err) => showErrors([err]));
  if (route.page === "job") window.scrollTo(0, 0);
});
if (currentRoute().page === "overview") state.overview = location.hash || "#/";
loop();
