/**
 * The due-time index in Redis sorted sets through Bun's built-in RedisClient (REDIS_URL).
 *
 * Bun's client pipelines commands sent in the same tick, so one call sends one command per
 * shard (per MEMBERS_PER_COMMAND chunk) at once and awaits them together. It speaks RESP3:
 * WITHSCORES replies come as [member, score] pairs with numeric scores (parseWithScores reads
 * both shapes).
 *
 * Reconnecting: after its reconnect attempts run out, Bun's client stays failed ("Connection
 * has failed") until connect() is called again, so every call reconnects first when needed.
 * Without a server, each attempt fails fast (connection refused) and the attempts are few, so
 * a call fails in well under a second instead of the default ~30 s; ping() is also capped by
 * its own timeout (a server that accepts and never answers).
 */
import { RedisClient } from "bun";
import { checkChanges, checkDueListParams, checkEntries, checkJobId, type DueChange, type DueEntry, type DueIndex } from "./due-index.ts";
import { withTimeout } from "../time/with-timeout.ts";
import {
  changeBatches,
  COMPARE_AND_SET_SCRIPT,
  compareAndSetArgs,
  intReply,
  mergeDue,
  parseWithScores,
  redisLayout,
  type RedisLayout,
  type RedisLayoutOptions,
  removeBatches,
  stringOrNull,
  upsertBatches,
  zaddArgs,
  zrangeDueArgs,
} from "./redis-layout.ts";

export interface BunRedisDueIndexOptions extends RedisLayoutOptions {
  /** redis:// or rediss:// URL (REDIS_URL). */
  url: string;
  /** TCP connect timeout per attempt; default 2000 ms. */
  connectionTimeoutMs?: number;
  /** Reconnect attempts before a call fails (Bun backs off 50, 100, 200 … ms); default 3. */
  maxRetries?: number;
  /** ping() answers false after this long; default 1000 ms. */
  pingTimeoutMs?: number;
}

export class BunRedisDueIndex implements DueIndex {
  readonly kind = "redis" as const;
  readonly layout: RedisLayout;
  private readonly client: RedisClient;
  private readonly pingTimeoutMs: number;
  private connecting: Promise<void> | undefined;
  private closed = false;

  constructor(opts: BunRedisDueIndexOptions) {
    this.layout = redisLayout(opts);
    if (typeof opts.url !== "string" || opts.url.length === 0) throw new Error("due index: a Redis URL (REDIS_URL) is required");
    if (/^https?:/i.test(opts.url)) {
      throw new Error("due index: REDIS_URL must be a redis:// URL; an https:// REST URL goes in UPSTASH_REDIS_REST_URL");
    }
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 1000;
    this.client = new RedisClient(opts.url, {
      connectionTimeout: opts.connectionTimeoutMs ?? 2000,
      maxRetries: opts.maxRetries ?? 3,
      autoReconnect: true,
    });
  }

  async entriesUpsert(p: { entries: DueEntry[] }): Promise<void> {
    checkEntries(p.entries);
    const batches = upsertBatches(this.layout, p.entries);
    if (batches.length === 0) return;
    await this.run(batches.map((b) => ["ZADD", [b.key, ...zaddArgs(b.items)]]));
  }

  async entriesRemove(p: { jobIds: string[] }): Promise<void> {
    p.jobIds.forEach(checkJobId);
    const batches = removeBatches(this.layout, p.jobIds);
    if (batches.length === 0) return;
    await this.run(batches.map((b) => ["ZREM", [b.key, ...b.items]]));
  }

  async entriesCompareAndSet(p: { changes: DueChange[] }): Promise<number> {
    checkChanges(p.changes);
    const batches = changeBatches(this.layout, p.changes);
    if (batches.length === 0) return 0;
    const replies = await this.run(batches.map((b) => ["EVAL", [COMPARE_AND_SET_SCRIPT, "1", b.key, ...compareAndSetArgs(b.items)]]));
    return replies.reduce<number>((sum, r) => sum + intReply(r, "EVAL compare-and-set"), 0);
  }

  async dueList(p: { dueBy: number; limit: number; shards?: readonly number[] }): Promise<DueEntry[]> {
    checkDueListParams(p);
    const keys = this.layout.keysOf(p.shards);
    if (keys.length === 0) return [];
    const replies = await this.run(keys.map((k) => ["ZRANGE", zrangeDueArgs(k, p)]));
    return mergeDue(replies.map(parseWithScores), p.limit);
  }

  async earliestDue(): Promise<number | null> {
    const replies = await this.run(this.layout.shardKeys.map((k) => ["ZRANGE", [k, "0", "0", "WITHSCORES"]]));
    return mergeDue(replies.map(parseWithScores), 1)[0]?.dueMs ?? null;
  }

  async size(): Promise<number> {
    const replies = await this.run(this.layout.shardKeys.map((k) => ["ZCARD", [k]]));
    return replies.reduce<number>((sum, r) => sum + intReply(r, "ZCARD"), 0);
  }

  async clear(): Promise<void> {
    // One DEL per key: a multi-key DEL fails across cluster slots.
    await this.run([...this.layout.shardKeys, this.layout.markerKey].map((k) => ["DEL", [k]]));
  }

  async builtMarkerGet(): Promise<string | null> {
    const [r] = await this.run([["GET", [this.layout.markerKey]]]);
    return stringOrNull(r, "GET marker");
  }

  async builtMarkerSet(p: { value: string }): Promise<void> {
    await this.run([["SET", [this.layout.markerKey, p.value]]]);
  }

  async ping(): Promise<boolean> {
    if (this.closed) return false;
    return withTimeout(
      this.pingTimeoutMs,
      async () => {
        try {
          const [r] = await this.run([["PING", []]]);
          return r === "PONG";
        } catch {
          return false;
        }
      },
      false,
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
  }

  /** Sends the commands together (Bun pipelines them) and returns the replies in order. */
  private async run(cmds: [string, string[]][]): Promise<unknown[]> {
    if (this.closed) throw new Error("due index: the Redis index is closed");
    await this.ensureConnected();
    return Promise.all(cmds.map(([c, args]) => this.client.send(c, args) as Promise<unknown>));
  }

  private async ensureConnected(): Promise<void> {
    if (this.client.connected) return;
    // One connect at a time; concurrent callers share it.
    this.connecting ??= this.client.connect().then(
      () => {
        this.connecting = undefined;
      },
      (err: unknown) => {
        this.connecting = undefined;
        throw err;
      },
    );
    await this.connecting;
  }
}
