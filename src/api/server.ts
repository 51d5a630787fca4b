import type { Hono } from "hono";
import type { AppEnv } from "./auth.ts";

/** Serves the app with Bun; the server is passed to handlers so they can see the client address. */
export function serve(app: Hono<AppEnv>, p: { host: string; port: number }) {
  const server = Bun.serve({
    hostname: p.host,
    port: p.port,
    // Long-polling is not used; a slow client should not hold a connection for ever.
    idleTimeout: 30,
    fetch: (req, srv) => app.fetch(req, { server: srv }),
  });
  return server;
}
