import client from "prom-client";
import type { GaugeSnapshot } from "./gauge-snapshot.ts";
import type { Logger } from "./log.ts";
import type { Metrics } from "./metrics.ts";

/** A shard is hot when its backlog is above this many jobs and this many times the median… */
const HOT_MIN = 100;
const HOT_FACTOR = 4;
/** …for this many snapshots in a row (a burst that drains at once is not a hot shard). */
const HOT_SCRAPES = 3;

/**
 * Per-shard due backlog and oldest due age, the hot-shard signal and the due-soon forecast,
 * from the scrape's snapshot (gauge-snapshot.ts). Shard labels are bounded by
 * SCHEDULER_SHARDS (≤ 1024).
 */
export function registerShardGauges(metrics: Metrics, snapshot: () => Promise<GaugeSnapshot>, o: { shards: number; log: Logger }): void {
  const streak = new Map<number, number>();
  let judged: GaugeSnapshot | undefined;
  let hot: number[] = [];
  /** Counts each snapshot once toward the streaks, however many scrapes share it. */
  const hotShards = (s: GaugeSnapshot): number[] => {
    if (s === judged) return hot;
    judged = s;
    const counts = Array.from({ length: o.shards }, (_, i) => s.byShard.get(i)?.n ?? 0);
    const median = [...counts].sort((a, b) => a - b)[Math.floor(counts.length / 2)] ?? 0;
    hot = [];
    for (const [i, n] of counts.entries()) {
      const k = n > HOT_MIN && n > HOT_FACTOR * median ? (streak.get(i) ?? 0) + 1 : 0;
      if (k === 0) streak.delete(i);
      else streak.set(i, k);
      if (k >= HOT_SCRAPES) hot.push(i);
      if (k === HOT_SCRAPES) o.log.warn({ shard: i, backlog: n, median }, "hot shard: its due backlog stays far above the other shards'");
    }
    return hot;
  };
  const registers = [metrics.registry];
  new client.Gauge({
    name: "scheduler_shard_due_backlog",
    help: "Due, undispatched jobs per dispatch shard",
    labelNames: ["shard"],
    registers,
    async collect() {
      const s = await snapshot();
      for (let i = 0; i < o.shards; i++) this.set({ shard: String(i) }, s.byShard.get(i)?.n ?? 0);
    },
  });
  new client.Gauge({
    name: "scheduler_shard_oldest_due_age_seconds",
    help: "Age of the oldest due, undispatched job per dispatch shard",
    labelNames: ["shard"],
    registers,
    async collect() {
      const s = await snapshot();
      for (let i = 0; i < o.shards; i++) this.set({ shard: String(i) }, s.byShard.get(i)?.oldest ?? 0);
    },
  });
  new client.Gauge({
    name: "scheduler_hot_shards",
    help: `Shards whose due backlog stayed above ${HOT_FACTOR}× the median (and ${HOT_MIN} jobs) for ${HOT_SCRAPES} scrapes in a row`,
    registers,
    async collect() {
      this.set(hotShards(await snapshot()).length);
    },
  });
  new client.Gauge({
    name: "scheduler_due_soon",
    help: "Scheduled jobs due within the next minute, 5 minutes, 15 minutes: scale workers ahead of a known burst",
    labelNames: ["within"],
    registers,
    async collect() {
      const s = (await snapshot()).dueSoon;
      this.set({ within: "1m" }, s.m1);
      this.set({ within: "5m" }, s.m5);
      this.set({ within: "15m" }, s.m15);
    },
  });
}
