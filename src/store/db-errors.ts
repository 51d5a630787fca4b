/**
 * The SQLSTATE of an error the server sent (postgres.js PostgresError, PGlite's
 * DatabaseError: both carry severity and code); undefined for anything else.
 */
export function sqlState(err: unknown): string | undefined {
  const e = err as { code?: unknown; severity?: unknown } | null | undefined;
  if (!e || typeof e.severity !== "string" || typeof e.code !== "string") return undefined;
  return /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
}

/**
 * A metric label for a failed statement: its SQLSTATE, else the driver's or the OS's code
 * (CONNECTION_CLOSED, ECONNRESET), else "unknown". Bounded: codes, never messages.
 */
export function errorCode(err: unknown): string {
  const s = sqlState(err);
  if (s) return s;
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === "string" && /^[A-Z0-9_]{1,40}$/.test(code) ? code : "unknown";
}

/**
 * Whether the error came from the database or the connection to it at all (a SQLSTATE, a
 * driver or socket code) rather than from our own code.
 */
export function isDatabaseError(err: unknown): boolean {
  return typeof (err as { code?: unknown } | null | undefined)?.code === "string";
}

/**
 * Errors about the values a statement was given (class 22, data exception; class 23,
 * integrity constraint violation): the same statement with the same values fails again.
 * Everything else the server says (deadlock, serialization failure, lock or statement
 * timeout, shutdown, too many connections, ...) may pass if tried again.
 */
export function isDataError(err: unknown): boolean {
  const s = sqlState(err);
  return s !== undefined && (s.startsWith("22") || s.startsWith("23"));
}
