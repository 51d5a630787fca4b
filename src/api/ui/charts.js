// Small hand-written SVG charts; colours come from classes in style.css.

const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = String(text);
  return el;
}

/** A round upper bound for an axis: 1, 2, 5 × 10^k at or above max. */
function niceMax(max) {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= max);
}

const hhmmss = (iso) => new Date(iso).toLocaleTimeString("en-GB");

/**
 * Lines over time. series: [{ name, cls, values }], all as long as times (ISO instants).
 */
export function lineChart(times, series, { width = 520, height = 180 } = {}) {
  const L = 44,
    R = 8,
    T = 8,
    B = 22;
  const w = width - L - R,
    hgt = height - T - B;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "line-chart", role: "img" });
  const top = niceMax(Math.max(0, ...series.flatMap((x) => x.values)));
  const x = (i) => L + (times.length < 2 ? w : (i / (times.length - 1)) * w);
  const y = (v) => T + hgt - (v / top) * hgt;
  for (const f of [0, 0.5, 1]) {
    svg.append(s("line", { x1: L, x2: L + w, y1: y(top * f), y2: y(top * f), class: "grid" }));
    svg.append(s("text", { x: L - 6, y: y(top * f) + 4, class: "axis", "text-anchor": "end" }, (top * f).toLocaleString("en-US")));
  }
  if (times.length > 0) {
    svg.append(s("text", { x: L, y: height - 6, class: "axis" }, hhmmss(times[0])));
    svg.append(s("text", { x: L + w, y: height - 6, class: "axis", "text-anchor": "end" }, hhmmss(times[times.length - 1])));
  }
  for (const line of series) {
    const pts = line.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    const path = s("polyline", { points: pts, class: `line ${line.cls}` });
    path.append(s("title", {}, line.name));
    svg.append(path);
  }
  return svg;
}

/** A legend for lineChart's series. */
export function legend(series) {
  const el = document.createElement("div");
  el.className = "legend";
  for (const x of series) {
    const item = document.createElement("span");
    const swatch = document.createElement("i");
    swatch.className = `swatch ${x.cls}`;
    item.append(swatch, ` ${x.name}`);
    el.append(item);
  }
  return el;
}

/** Horizontal bars: [{ label, value, cls }], longest bar = largest value. */
export function barChart(items, { width = 520, row = 22 } = {}) {
  const L = 110,
    R = 60;
  const height = Math.max(1, items.length) * row + 4;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "bar-chart", role: "img" });
  const top = Math.max(1, ...items.map((i) => i.value));
  items.forEach((it, i) => {
    const y0 = 2 + i * row;
    const len = (it.value / top) * (width - L - R);
    svg.append(s("text", { x: L - 8, y: y0 + row / 2 + 4, class: "axis", "text-anchor": "end" }, it.label));
    const bar = s("rect", { x: L, y: y0 + 3, width: Math.max(it.value > 0 ? 2 : 0, len).toFixed(1), height: row - 6, rx: 2, class: `bar ${it.cls ?? ""}` });
    bar.append(s("title", {}, `${it.label}: ${it.value}`));
    svg.append(bar);
    svg.append(s("text", { x: L + len + 6, y: y0 + row / 2 + 4, class: "value" }, it.value.toLocaleString("en-US")));
  });
  return svg;
}

/** Columns for a histogram: [{ label, value }] left to right. */
export function columnChart(items, { width = 520, height = 170 } = {}) {
  const L = 36,
    R = 4,
    T = 18,
    B = 34;
  const w = width - L - R,
    hgt = height - T - B;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "column-chart", role: "img" });
  const top = niceMax(Math.max(0, ...items.map((i) => i.value)));
  const slot = w / Math.max(1, items.length);
  svg.append(s("line", { x1: L, x2: L + w, y1: T + hgt, y2: T + hgt, class: "grid" }));
  svg.append(s("line", { x1: L, x2: L + w, y1: T, y2: T, class: "grid" }));
  svg.append(s("text", { x: L - 6, y: T + 4, class: "axis", "text-anchor": "end" }, top.toLocaleString("en-US")));
  items.forEach((it, i) => {
    const bh = (it.value / top) * hgt;
    const x0 = L + i * slot;
    const bar = s("rect", {
      x: (x0 + 2).toFixed(1),
      y: (T + hgt - bh).toFixed(1),
      width: (slot - 4).toFixed(1),
      height: bh.toFixed(1),
      rx: 2,
      class: "bar lag",
    });
    bar.append(s("title", {}, `${it.label}: ${it.value}`));
    svg.append(bar);
    if (it.value > 0)
      svg.append(s("text", { x: x0 + slot / 2, y: T + hgt - bh - 3, class: "value", "text-anchor": "middle" }, it.value.toLocaleString("en-US")));
    svg.append(s("text", { x: x0 + slot / 2, y: T + hgt + 13 + (i % 2) * 11, class: "axis", "text-anchor": "middle" }, it.label));
  });
  return svg;
}
