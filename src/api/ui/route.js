// Where the page is, kept in the URL's fragment so that a view can be linked to, bookmarked
// and survives a reload: the overview with its job filters (#/?status=dead&tenant=acme) or
// one job's page (#/jobs/<id>), and the page of the list (cursor, as the API gave it out). The
// fragment never reaches the server.

/** The job list's filters, named as GET /v1/jobs names them. */
export const FILTERS = ["status", "tenant", "schedule_id"];

export function currentRoute() {
  const frag = location.hash.replace(/^#/, "") || "/";
  const job = /^\/jobs\/([^/?]+)$/.exec(frag);
  if (job) {
    let id = job[1];
    try {
      id = decodeURIComponent(id);
    } catch {
      // A mistyped %-escape: ask for it as written; the API answers 404.
    }
    return { page: "job", id };
  }
  const q = new URLSearchParams(frag.split("?")[1] ?? "");
  const filters = {};
  for (const k of FILTERS) {
    const v = q.get(k)?.trim();
    if (v) filters[k] = v;
  }
  return { page: "overview", filters, cursor: q.get("cursor") || null };
}

/** The overview with these filters; a cursor only when paging through their results. */
export function overviewHref(filters = {}, cursor = null) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (filters[k]) q.set(k, filters[k]);
  if (cursor) q.set("cursor", cursor);
  const s = q.toString();
  return s ? `#/?${s}` : "#/";
}

export const jobHref = (id) => `#/jobs/${encodeURIComponent(id)}`;

/** The API call behind the job list: the newest 25 that match the filters (after the cursor). */
export function jobsPath(filters, cursor = null) {
  const q = new URLSearchParams({ order: "desc", limit: "25" });
  for (const k of FILTERS) if (filters[k]) q.set(k, filters[k]);
  if (cursor) q.set("cursor", cursor);
  return `/v1/jobs?${q}`;
}
