/**
 * The one database seam. Two drivers implement it: postgres.js against a real server and
 * PGlite in process (the embedded default). Every query is plain SQL text with $n params,
 * so the same named queries run on both.
 */
export interface Queryable {
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
}

/** A transaction's handle. */
export interface Tx extends Queryable {
  /**
   * Runs fn under a savepoint: when it throws, only its work is rolled back and the
   * transaction goes on. Without one, a failed statement dooms the whole transaction (and
   * postgres.js rejects a transaction in which any statement failed, caught or not).
   */
  savepoint<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
}

export interface Db extends Queryable {
  readonly kind: "postgres" | "pglite";
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (q: Tx) => Promise<T>): Promise<T>;
  /**
   * LISTEN on a channel. onListen runs after every (re)subscription: notifications sent
   * while disconnected are gone, so that is the moment to re-scan.
   */
  listen(channel: string, onNotify: (payload: string) => void, onListen?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
