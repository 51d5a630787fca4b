// The dashboard: reads the same JSON API as any user, with the token pasted into the page,
// and redraws every few seconds.
import { call, token } from "./api.js";
import { fill, h } from "./dom.js";
import { renderBacklog, renderCluster, renderDlq, renderHealth, renderJobs, renderLag, renderSchedules, renderTenants, renderThroughput } from "./sections.js";

const REFRESH_MS = 3000;
const PREVIEW_N = 8;

const state = { dlq: [], schedules: [], previews: {} };
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

function showErrors(errors) {
  const banner = document.getElementById("auth-error");
  if (errors.length === 0) {
    banner.hidden = true;
    return;
  }
  const e = errors.find((x) => x.auth) ?? errors[0];
  const hint = e.status === 401
    ? "Paste a valid token above (SCHEDULER_TOKENS)."
    : e.status === 403 ? "This token may not read this; it needs the jobs:read scope (admin to replay)." : "";
  fill("auth-error", h("b", {}, String(e)), " ", hint);
  banner.hidden = false;
}

async function refresh() {
  const [stats, jobs, dlq, schedules] = await Promise.allSettled([
    call("GET", "/v1/stats"),
    call("GET", "/v1/jobs?order=desc&limit=25"),
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
  if (jobs.status === "fulfilled") renderJobs(jobs.value.items);
  if (dlq.status === "fulfilled") {
    state.dlq = dlq.value.items;
    // An open reason form would lose what is being typed.
    if (!ui.replaying) renderDlq(state.dlq, ui);
  }
  if (schedules.status === "fulfilled") {
    state.schedules = schedules.value.items;
    renderSchedules(state.schedules, state.previews, preview);
  }
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString("en-GB")}`;
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
  renderSchedules(state.schedules, state.previews, preview);
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
loop();
