// Building the page from API data: elements are made, never parsed from strings, so a
// tenant name, URL or error text is always shown as text.

/** h("td", { class: "x" }, "text", child, …): an element; null and false children are left out. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

/** Replaces what the element with this id holds. */
export function fill(id, ...children) {
  const el = document.getElementById(id);
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

export function table(headers, rows, empty) {
  if (rows.length === 0) return h("p", { class: "muted" }, empty);
  return h(
    "table",
    {},
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((x) => h("th", {}, x)),
      ),
    ),
    h("tbody", {}, rows),
  );
}

export const num = (x) => Number(x ?? 0).toLocaleString("en-US");

/** An instant as local wall time with its UTC offset, and the full ISO text on hover. */
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return h("time", { datetime: iso, title: iso }, d.toLocaleString("sv-SE") + offset(d));
}

function offset(d) {
  const m = -d.getTimezoneOffset();
  const a = Math.abs(m);
  return ` ${m < 0 ? "-" : "+"}${String(Math.floor(a / 60)).padStart(2, "0")}:${String(a % 60).padStart(2, "0")}`;
}

export const shortId = (id) => h("code", { title: id }, id.slice(-12));

/** A status (class s-…) or, with kind "o", an attempt outcome (class o-…) as a coloured label. */
export const badge = (status, kind = "s") => h("span", { class: `badge ${kind}-${status}` }, status);
