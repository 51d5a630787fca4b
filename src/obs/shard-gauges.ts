import client from "prom-client";
import type { Db } from "../store/db.ts";
import { sql } from "../store/sql.ts";
import type { Logger } from "./log.ts";
import type { Metrics } from "./metrics.ts";

/** A shard is hot when its backlog is above this many jobs and this many times the median… */
const HOT_MIN = 100;
const HOT_FACTOR = 4;
/** …for this many scrapes in a row (a burst that drains at once is not a hot shard). */
const HOT_SCRAPES = 3;

/**
 * Per-shard due backlog and oldest due age, the hot-shard signal and the due-soon forecast,
 * read at scrape time (cached like the job gauges). Shard labels are bounded by
 * SCHEDULER_SHARDS (≤ 1024).
 */
export function registerShardGauges(metrics: Metrics, db: Db, o: { shards: number; log: Logger; cacheMs?: number }): void {
  const cacheMs = o.cacheMs ?? 2000;
  interface Snap { byShard: Map<number, { n: number; oldest: number }>; soon: { m1: number; m5: number; m15: number }; hot: number[] }
  let last: Snap | undefined;
  let cachedAt = 0;
  let pending: Promise<Snap> | undefined;
  const streak = new Map<number, number>();
  const read = async (): Promise<Snap> => {
    if (last && Date.now() - cachedAt < cacheMs) return last;
    pending ??= (async () => {
      try {
        const rows = await db.query<{ shard: number; n: string; oldest_age_s: string | null }>(sql("DueBacklogByShard"), [o.shards]);
        const [s] = await db.query<{ m1: string; m5: string; m15: string }>(sql("DueSoon"));
        const byShard = new Map(rows.map((r) => [Number(r.shard), { n: Number(r.n), oldest: Math.max(0, Number(r.oldest_age_s ?? 0)) }]));
        const counts = Array.from({ length: o.shards }, (_, i) => byShard.get(i)?.n ?? 0).sort((a, b) => a - b);
        const median = counts[Math.floor(counts.length / 2)] ?? 0;
        const hot: number[] = [];
        for (let i = 0; i < o.shards; i++) {
          const n = byShard.get(i)?.n ?? 0;
          const isHot = n > HOT_MIN && n > HOT_FACTOR * median;
          const k = isHot ? (streak.get(i) ?? 0) + 1 : 0;
          if (k === 0) streak.delete(i);
          else streak.set(i, k);
          if (k >= HOT_SCRAPES) hot.push(i);
          if (k === HOT_SCRAPES) o.log.warn({ shard: i, backlog: n, median }, "hot shard: its due backlog stays far above the other shards'");
        }
        last = { byShard, soon: { m1: Number(s?.m1 ?? 0), m5: Number(s?.m5 ?? 0), m15: Number(s?.m15 ?? 0) }, hot };
        cachedAt = Date.now();
        return last;
      } catch {
        return last ?? { byShard: new Map(), soon: { m1: 0, m5: 0, m15: 0 }, hot: [] };
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
  const registers = [metrics.registry];
  new client.Gauge({
    name: "scheduler_shard_due_backlog", help: "Due, undispatched jobs per dispatch shard", labelNames: ["shard"], registers,
    async collect() {
      const s = await read();
      for (let i = 0; i < o.shards; i++) this.set({ shard: String(i) }, s.byShard.get(i)?.n ?? 0);
    },
  });
  new client.Gauge({
    name: "scheduler_shard_oldest_due_age_seconds", help: "Age of the oldest due, undispatched job per dispatch shard", labelNames: ["shard"], registers,
    async collect() {
      const s = await read();
      for (let i = 0; i < o.shards; i++) this.set({ shard: String(i) }, s.byShard.get(i)?.oldest ?? 0);
    },
  });
  new client.Gauge({
    name: "scheduler_hot_shards", help: `Shards whose due backlog stayed above ${HOT_FACTOR}× the median (and ${HOT_MIN} jobs) for ${HOT_SCRAPES} scrapes in a row`, registers,
    async collect() { this.set((await read()).hot.length); },
  });
  new client.Gauge({
    name: "scheduler_due_soon", help: "Scheduled jobs due within the next minute, 5 minutes, 15 minutes: scale workers ahead of a known burst", labelNames: ["within"], registers,
    async collect() {
      const s = (await read()).soon;
      this.set({ within: "1m" }, s.m1);
      this.set({ within: "5m" }, s.m5);
      this.set({ within: "15m" }, s.m15);
    },
  });
}
