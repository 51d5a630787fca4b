import type { Sql, TransactionSql } from "postgres";
import { query } from "./queries.ts";

/** Creates the kit's tables if missing (idempotent: run it at every start). */
export async function migrateReceiver(sql: Sql): Promise<void> {
  await sql.unsafe(query("Migrate"));
}

/** The migration's SQL, for projects that apply migrations with their own tool. */
export const RECEIVER_MIGRATION_SQL: string = query("Migrate");

/**
 * Runs `effect` at most once per webhook-id: the effect's writes (made through `tx`) and the
 * processed marker commit in one transaction. A repeated call, even after a crash at any
 * point, finds the marker and gets the first call's result (as JSON) without running the
 * effect; concurrent repeats wait for the first to commit. If the effect throws, nothing is
 * kept and a retry runs it afresh.
 */
export async function once<T>(sql: Sql, webhookId: string, effect: (tx: TransactionSql) => Promise<T>): Promise<T> {
  return (await onceWithInfo(sql, webhookId, effect)).result;
}

/** `once`, also saying whether this call ran the effect (`replayed: false`) or found it done. */
export async function onceWithInfo<T>(sql: Sql, webhookId: string, effect: (tx: TransactionSql) => Promise<T>): Promise<{ result: T; replayed: boolean }> {
  if (!webhookId) throw new Error("once: webhookId is empty (use the call's webhook-id header)");
  return (await sql.begin(async (tx) => {
    const claimed = await tx.unsafe(query("ClaimMarker"), [webhookId]);
    if (claimed.length === 0) {
      const [m] = await tx.unsafe<{ result: T }[]>(query("GetMarker"), [webhookId]);
      // Conflicted, then gone: retention pruned it in between (keep markers longer than retries).
      if (!m) throw new Error(`once: the marker of ${webhookId} was deleted while this call read it; retry the call`);
      return { result: m.result, replayed: true };
    }
    const result = await effect(tx);
    await tx.unsafe(query("SetMarkerResult"), [webhookId, JSON.stringify(result ?? null)]);
    return { result, replayed: false };
  })) as { result: T; replayed: boolean };
}

/** The verify answer (README "Verify before retry") from the marker table. */
export async function processedStatus(sql: Sql, webhookId: string): Promise<{ processed: true; processed_at: string } | { processed: false }> {
  const [m] = await sql.unsafe<{ processed_at: Date }[]>(query("GetMarker"), [webhookId]);
  return m ? { processed: true, processed_at: new Date(m.processed_at).toISOString() } : { processed: false };
}

/**
 * Retention: deletes markers and fencing rows older than `keepMs`, in batches. Keep them
 * longer than the scheduler may still call for a job (its retries, expires_at, and dead-letter
 * replays, which reuse the job id): a call after its marker is gone runs the effect again.
 */
export async function pruneProcessed(sql: Sql, o: { keepMs: number; batch?: number }): Promise<{ markers: number; fences: number }> {
  const total = { markers: 0, fences: 0 };
  const batch = o.batch ?? 1000;
  for (;;) {
    const [r] = await sql.unsafe<{ markers: number; fences: number }[]>(query("PruneProcessed"), [o.keepMs, batch]);
    total.markers += r.markers;
    total.fences += r.fences;
    if (r.markers < batch && r.fences < batch) return total;
  }
}

/** Prunes every `everyMs` (default hourly) until stopped; errors go to `onError` and the next round tries again. */
export function startRetention(sql: Sql, o: { keepMs: number; everyMs?: number; onError?: (err: unknown) => void }): { stop(): void } {
  const timer = setInterval(() => {
    pruneProcessed(sql, o).catch((err) => o.onError?.(err));
  }, o.everyMs ?? 3_600_000);
  (timer as { unref?: () => void }).unref?.();
  return { stop: () => clearInterval(timer) };
}
