/**
 * Building the Redis due index from SQL. The index holds only a bounded future window
 * (now + windowMs): rebuildIndex empties it and loads every scheduled job due before the end
 * of the window, then sets the built marker last (a marker proves the load completed and
 * nothing flushed the index since). loadWindow adds the jobs of a later slice of time as the
 * window moves forward (window-loader.ts).
 */
import type { Db } from "../store/db.ts";
import { indexWindowLoad } from "../store/index-queries.ts";
import type { DueEntry, DueIndex } from "./due-index.ts";

export interface LoadWindowOptions {
  db: Db;
  index: DueIndex;
  /** Epoch ms, inclusive; null: every job due before `to` (overdue ones too). */
  from: number | null;
  /** Epoch ms, exclusive. */
  to: number;
  /** Rows per page (one query and one entriesUpsert each). */
  batch: number;
}

/** Loads scheduled jobs due in [from, to) into the index, page by page; returns how many. */
export async function loadWindow(o: LoadWindowOptions): Promise<number> {
  if (!Number.isInteger(o.batch) || o.batch < 1) throw new Error(`loadWindow: batch must be a positive integer, got ${o.batch}`);
  let loaded = 0;
  let cursor: { us: string; id: string } | null = null;
  for (;;) {
    const rows = await indexWindowLoad(o.db, { fromMs: o.from, toMs: o.to, after: cursor, limit: o.batch });
    if (rows.length === 0) break;
    const entries: DueEntry[] = rows.map((r) => ({ jobId: r.id, dueMs: r.due_at.getTime() }));
    await o.index.entriesUpsert({ entries });
    loaded += rows.length;
    const last = rows[rows.length - 1]!;
    cursor = { us: last.due_us, id: last.id };
    if (rows.length < o.batch) break;
  }
  return loaded;
}

export interface RebuildOptions {
  db: Db;
  index: DueIndex;
  windowMs: number;
  batch: number;
  now?: () => number;
}

export interface RebuildResult {
  loaded: number;
  /** Epoch ms: every scheduled job due before this instant was loaded. */
  loadedUntil: number;
}

/**
 * Clears the index, loads every scheduled job due before now + windowMs, then sets a fresh
 * built marker. Jobs written meanwhile reach the index through the outbox relay, so a write
 * racing the rebuild is not lost.
 */
export async function rebuildIndex(o: RebuildOptions): Promise<RebuildResult> {
  const now = (o.now ?? Date.now)();
  const loadedUntil = now + o.windowMs;
  await o.index.clear();
  // from: null: overdue jobs belong in the index too.
  const loaded = await loadWindow({ db: o.db, index: o.index, from: null, to: loadedUntil, batch: o.batch });
  await o.index.builtMarkerSet({ value: builtMarker(loadedUntil) });
  return { loaded, loadedUntil };
}

/**
 * The built marker: a fresh random value (so every rebuild is told apart) and the instant
 * the rebuild loaded until (so a window loader in another process knows where to go on from).
 */
export function builtMarker(loadedUntil: number): string {
  return `${crypto.randomUUID()}@${new Date(loadedUntil).toISOString()}`;
}

/** The loaded-until instant (epoch ms) of a built marker, or null when it has none. */
export function markerLoadedUntil(marker: string): number | null {
  const at = marker.lastIndexOf("@");
  if (at < 0) return null;
  const ms = Date.parse(marker.slice(at + 1));
  return Number.isFinite(ms) ? ms : null;
}
