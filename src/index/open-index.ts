import type { Config } from "../config.ts";
import type { Db } from "../store/db.ts";
import { BunRedisDueIndex } from "./bun-redis-index.ts";
import type { DueIndex } from "./due-index.ts";
import { SqlDueIndex } from "./sql-index.ts";
import { UpstashDueIndex } from "./upstash-index.ts";

/** REDIS_URL → Bun's client; UPSTASH_REDIS_REST_URL + token → REST; neither → the SQL index. */
export function openIndex(config: Pick<Config, "redisUrl" | "upstash" | "index" | "shards">, db: Db): DueIndex {
  // One sorted set per dispatch shard: a dispatcher reads only the sets of the shards it holds.
  const layout = { prefix: config.index.prefix, shards: config.shards, placement: "slot" as const };
  if (config.redisUrl) return new BunRedisDueIndex({ url: config.redisUrl, ...layout });
  if (config.upstash) return new UpstashDueIndex({ url: config.upstash.url, token: config.upstash.token, ...layout });
  return new SqlDueIndex(db);
}
