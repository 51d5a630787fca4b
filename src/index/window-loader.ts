/**
 * The window loader: the Redis due index holds only jobs due before now + windowMs, so as
 * time passes the window's far edge moves and the jobs it reaches must be added. Every pass
 * loads [loadedUntil, now + windowMs) from SQL and advances loadedUntil. (The outbox relay
 * leaves upserts beyond the window to this loader.)
 *
 * When the built marker is missing (Redis flushed or restarted without persistence, or no
 * rebuild yet in this process) the pass rebuilds the whole index instead.
 */
import type { Logger } from "../obs/log.ts";
import type { Db } from "../store/db.ts";
import { PeriodicLoop } from "../time/periodic-loop.ts";
import type { DueIndex } from "./due-index.ts";
import { loadWindow, markerLoadedUntil, rebuildIndex } from "./index-rebuild.ts";

export interface WindowLoaderOptions {
  db: Db;
  index: DueIndex;
  windowMs: number;
  batch: number;
  /** Pause between passes; well under windowMs so the window's edge is loaded ahead of time. */
  intervalMs: number;
  log: Logger;
  now?: () => number;
  onRebuild?: (r: { loaded: number; loadedUntil: number }) => void;
}

export interface WindowLoadResult {
  rebuilt: boolean;
  loaded: number;
  loadedUntil: number;
}

export class WindowLoader extends PeriodicLoop<WindowLoadResult> {
  /** Every scheduled job due before this instant is in the index (null: not known yet). */
  private loadedUntil: number | null = null;
  /** The built marker loadedUntil goes with. */
  private marker: string | null = null;

  constructor(private readonly o: WindowLoaderOptions) {
    super("window-loader", o.log);
  }

  /** Set by forceRebuild: the next pass rebuilds even over a valid marker. */
  private rebuildWanted = false;

  get loadedUntilMs(): number | null {
    return this.loadedUntil;
  }

  /**
   * The next pass rebuilds the whole index whatever the marker says: a new dispatch leader
   * does not know what happened to the index while someone else kept it.
   */
  forceRebuild(): void {
    this.rebuildWanted = true;
  }

  async runOnce(): Promise<WindowLoadResult> {
    const now = (this.o.now ?? Date.now)();
    const marker = await this.o.index.builtMarkerGet();
    const markerUntil = marker === null ? null : markerLoadedUntil(marker);
    if (this.rebuildWanted || marker === null || markerUntil === null) {
      const r = await rebuildIndex({ db: this.o.db, index: this.o.index, windowMs: this.o.windowMs, batch: this.o.batch, now: () => now });
      this.loadedUntil = r.loadedUntil;
      this.marker = await this.o.index.builtMarkerGet();
      this.rebuildWanted = false;
      this.o.log.info({ loaded: r.loaded, marker_was: marker, forced: marker !== null && markerUntil !== null }, "due index rebuilt");
      this.o.onRebuild?.(r);
      return { rebuilt: true, ...r };
    }
    // A marker this loader has not seen (a first pass, or another process rebuilt): that
    // rebuild loaded everything before its loaded-until instant and emptied the rest, so go
    // on from there. Never rebuild over someone else's marker: loaders would take turns.
    const from = marker !== this.marker || this.loadedUntil === null ? markerUntil : this.loadedUntil;
    this.marker = marker;
    const to = now + this.o.windowMs;
    if (to <= from) {
      this.loadedUntil = from;
      return { rebuilt: false, loaded: 0, loadedUntil: from };
    }
    const loaded = await loadWindow({ db: this.o.db, index: this.o.index, from, to, batch: this.o.batch });
    this.loadedUntil = to;
    return { rebuilt: false, loaded, loadedUntil: to };
  }

  protected nextDelayMs(): number {
    return this.o.intervalMs * (0.8 + Math.random() * 0.4);
  }
}
