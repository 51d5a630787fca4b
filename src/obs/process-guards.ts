import type { Logger } from "./log.ts";

/**
 * Error codes of a lost database or Redis connection: the socket, not the program, failed.
 * postgres.js can reject a promise nobody awaits any more when a connection dies mid-way
 * (the chaos suite saw a dispatcher exit on `read ECONNRESET` while backends were being
 * killed); every loop retries on its next pass and the database keeps the truth, so such a
 * rejection is logged, not fatal.
 */
const CONNECTION_LOSS = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "CONNECT_TIMEOUT",
  // admin_shutdown, crash_shutdown, cannot_connect_now
  "57P01",
  "57P02",
  "57P03",
]);

export function isConnectionLoss(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  // Class 08: connection exception.
  return CONNECTION_LOSS.has(code) || /^08[0-9A-Z]{3}$/.test(code);
}

/**
 * A rejection nobody handled: a lost connection is logged and the process goes on; anything
 * else is a bug, logged and fatal, as it would be without this handler.
 */
export function installProcessGuards(log: Logger): void {
  process.on("unhandledRejection", (reason) => {
    if (isConnectionLoss(reason)) {
      log.error({ err: reason }, "a connection failed with no caller left to tell (unhandled rejection); continuing, the pool reconnects");
      return;
    }
    log.fatal({ err: reason }, "unhandled rejection; exiting");
    process.exit(1);
  });
}
