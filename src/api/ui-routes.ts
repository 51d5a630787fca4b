import { Hono } from "hono";
import indexBundle from "./ui/index.html" with { type: "text" };
import styleCss from "./ui/style.css" with { type: "text" };
import appJs from "./ui/app.js" with { type: "text" };
import apiJs from "./ui/api.js" with { type: "text" };
import chartsJs from "./ui/charts.js" with { type: "text" };
import domJs from "./ui/dom.js" with { type: "text" };
import healthJs from "./ui/health.js" with { type: "text" };
import sectionsJs from "./ui/sections.js" with { type: "text" };
import routeJs from "./ui/route.js" with { type: "text" };
import jobPageJs from "./ui/job-page.js" with { type: "text" };
import { notFound } from "./errors.ts";

// bun-types types every .html import as a bundle for Bun's dev server; with type "text" it is
// the file's text.
const indexHtml = indexBundle as unknown as string;
const JS = "text/javascript; charset=utf-8";

/** The dashboard's files by name: imported as text, so the compiled binary carries them. */
const ASSETS: Record<string, { type: string; body: string }> = {
  "style.css": { type: "text/css; charset=utf-8", body: styleCss },
  "app.js": { type: JS, body: appJs },
  "api.js": { type: JS, body: apiJs },
  "charts.js": { type: JS, body: chartsJs },
  "dom.js": { type: JS, body: domJs },
  "health.js": { type: JS, body: healthJs },
  "sections.js": { type: JS, body: sectionsJs },
  "route.js": { type: JS, body: routeJs },
  "job-page.js": { type: JS, body: jobPageJs },
};

/**
 * The page may load only its own files and talk only to this server: the dashboard works
 * offline, and a job's URL or error text shown on it can never run as script.
 */
const HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // A new binary brings new files; revalidating costs little on a page this small.
  "cache-control": "no-cache",
};

/** GET /ui and its files (api mode, no token: the data calls the page makes carry it). */
export function uiRoutes() {
  const app = new Hono();
  app.get("/ui", (c) => c.body(indexHtml, 200, { ...HEADERS, "content-type": "text/html; charset=utf-8" }));
  app.get("/ui/:file", (c) => {
    const name = c.req.param("file");
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
    if (!asset) throw notFound(`dashboard file ${name}`);
    return c.body(asset.body, 200, { ...HEADERS, "content-type": asset.type });
  });
  return app;
}
