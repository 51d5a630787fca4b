import { Hono } from "hono";
import { buildOpenApi } from "./document.ts";
import { renderDocsPage } from "./docs-page.ts";

/** GET /openapi.json and GET /docs, mounted before authentication: they need no token. */
export function openApiRoutes(version: string) {
  const app = new Hono();
  // Built on first request: converting every schema takes a few milliseconds, and the
  // dispatcher or a worker never needs it.
  let doc: Record<string, unknown> | undefined;
  let page: string | undefined;
  const document = () => (doc ??= buildOpenApi(version));
  app.get("/openapi.json", (c) => c.json(document()));
  app.get("/docs", (c) => c.html((page ??= renderDocsPage(document()))));
  return app;
}
