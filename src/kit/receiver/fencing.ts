import type { Sql } from "postgres";
import { query } from "./queries.ts";

/**
 * Keeps the highest Scheduler-Fencing-Token seen per job. `observe` records a token and says
 * whether the call may go ahead: false when a higher one was seen before (a stale leader or
 * a fenced-off region sent it). Equal tokens go ahead: retries under one leader repeat it.
 */
export interface FencingStore {
  observe(jobId: string, token: bigint): Promise<boolean>;
}

/** In this process only: enough for one receiver process; use pgFencing for several. */
export function memoryFencing(): FencingStore {
  const highest = new Map<string, bigint>();
  return {
    async observe(jobId, token) {
      const seen = highest.get(jobId);
      if (seen !== undefined && seen > token) return false;
      highest.set(jobId, token);
      return true;
    },
  };
}

/** In the receiver's PostgreSQL (table scheduler_receiver_fencing, see migrateReceiver). */
export function pgFencing(sql: Sql): FencingStore {
  return {
    async observe(jobId, token) {
      const [row] = await sql.unsafe<{ token: string }[]>(query("RaiseFencing"), [jobId, token.toString()]);
      return BigInt(row.token) <= token;
    },
  };
}
