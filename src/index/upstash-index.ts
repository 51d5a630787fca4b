/**
 * The due-time index in Redis sorted sets through @upstash/redis over REST
 * (UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN). Same keys as the Bun client
 * (redis-layout.ts), so either client can read what the other wrote.
 *
 * Each call is one HTTP request: an explicit pipeline with one command per shard (per
 * MEMBERS_PER_COMMAND chunk), split into several requests only for large writes. The client
 * is set up so replies stay raw: automaticDeserialization off (else numeric-looking members
 * come back as numbers), auto-pipelining off (calls already batch), telemetry off.
 * Over REST, replies are RESP2-shaped: WITHSCORES is flat, scores are strings.
 *
 * @upstash/redis retry quirk: `retry: false` still fetches twice (attempts = 1 plus the first
 * try); `{ retries: 0 }` fetches once. A hung request is cut by a per-request AbortSignal;
 * it must be given as a function, because a plain aborted signal makes the client return a
 * fake result ("Aborted") instead of throwing.
 */
import { Redis } from "@upstash/redis";
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
} from "./redis-layout.ts";

export interface UpstashDueIndexOptions extends RedisLayoutOptions {
  /** UPSTASH_REDIS_REST_URL, https://… */
  url: string;
  /** UPSTASH_REDIS_REST_TOKEN */
  token: string;
  /** Retries of a failed fetch (network error), default 2; tests use 0. */
  retries?: number;
  /** Each HTTP request is aborted after this long; default 5000 ms. */
  requestTimeoutMs?: number;
  /** ping() answers false after this long; default 1000 ms. */
  pingTimeoutMs?: number;
}

/** Members per HTTP request (over its ZADD/ZREM commands): keeps a body to a few hundred KB. */
export const MEMBERS_PER_REQUEST = 5000;

export class UpstashDueIndex implements DueIndex {
  readonly kind = "upstash" as const;
  readonly layout: RedisLayout;
  private readonly redis: Redis;
  private readonly pingRedis: Redis;
  private readonly pingTimeoutMs: number;
  private closed = false;

  constructor(opts: UpstashDueIndexOptions) {
    this.layout = redisLayout(opts);
    if (typeof opts.url !== "string" || !/^https?:\/\//i.test(opts.url)) {
      throw new Error("due index: UPSTASH_REDIS_REST_URL must be an http(s):// URL (a redis:// URL goes in REDIS_URL)");
    }
    if (typeof opts.token !== "string" || opts.token.length === 0) {
      throw new Error("due index: UPSTASH_REDIS_REST_TOKEN is required with UPSTASH_REDIS_REST_URL");
    }
    const retries = opts.retries ?? 2;
    if (!Number.isInteger(retries) || retries < 0 || retries > 10) {
      throw new Error(`due index: retries must be an integer in 0..10, got ${String(retries)}`);
    }
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 1000;
    const requestTimeoutMs = opts.requestTimeoutMs ?? 5000;
    const make = (retries: number, timeoutMs: number) =>
      new Redis({
        url: opts.url,
        token: opts.token,
        automaticDeserialization: false,
        enableAutoPipelining: false,
        enableTelemetry: false,
        retry: { retries, backoff: (n) => Math.min(1000, 50 * 2 ** n) },
        signal: () => AbortSignal.timeout(timeoutMs),
      });
    this.redis = make(retries, requestTimeoutMs);
    this.pingRedis = make(0, this.pingTimeoutMs);
  }

  async entriesUpsert(p: { entries: DueEntry[] }): Promise<void> {
    checkEntries(p.entries);
    const batches = upsertBatches(this.layout, p.entries);
    await this.inRequests(batches, (pipe, b) => {
      const [first, ...rest] = b.items.map((e) => ({ score: e.dueMs, member: e.jobId }));
      pipe.zadd(b.key, first, ...rest);
    });
  }

  async entriesRemove(p: { jobIds: string[] }): Promise<void> {
    p.jobIds.forEach(checkJobId);
    const batches = removeBatches(this.layout, p.jobIds);
    await this.inRequests(batches, (pipe, b) => {
      pipe.zrem(b.key, ...b.items);
    });
  }

  async entriesCompareAndSet(p: { changes: DueChange[] }): Promise<number> {
    checkChanges(p.changes);
    const batches = changeBatches(this.layout, p.changes);
    const replies = await this.inRequests(batches, (pipe, b) => {
      pipe.eval(COMPARE_AND_SET_SCRIPT, [b.key], compareAndSetArgs(b.items));
    });
    return replies.reduce<number>((sum, r) => sum + intReply(r, "EVAL compare-and-set"), 0);
  }

  async dueList(p: { dueBy: number; limit: number; shards?: readonly number[] }): Promise<DueEntry[]> {
    checkDueListParams(p);
    const keys = this.layout.keysOf(p.shards);
    if (keys.length === 0) return [];
    const pipe = this.pipeline();
    for (const k of keys) {
      pipe.zrange(k, "-inf", p.dueBy, { byScore: true, offset: 0, count: p.limit, withScores: true });
    }
    const replies: unknown[] = await pipe.exec();
    return mergeDue(replies.map(parseWithScores), p.limit);
  }

  async earliestDue(): Promise<number | null> {
    const pipe = this.pipeline();
    for (const k of this.layout.shardKeys) pipe.zrange(k, 0, 0, { withScores: true });
    const replies: unknown[] = await pipe.exec();
    return mergeDue(replies.map(parseWithScores), 1)[0]?.dueMs ?? null;
  }

  async size(): Promise<number> {
    const pipe = this.pipeline();
    for (const k of this.layout.shardKeys) pipe.zcard(k);
    const replies: unknown[] = await pipe.exec();
    return replies.reduce<number>((sum, r) => sum + intReply(r, "ZCARD"), 0);
  }

  async clear(): Promise<void> {
    const pipe = this.pipeline();
    // One DEL per key: a multi-key DEL fails across cluster slots.
    for (const k of [...this.layout.shardKeys, this.layout.markerKey]) pipe.del(k);
    await pipe.exec();
  }

  async builtMarkerGet(): Promise<string | null> {
    this.checkOpen();
    return stringOrNull(await this.redis.get(this.layout.markerKey), "GET marker");
  }

  async builtMarkerSet(p: { value: string }): Promise<void> {
    this.checkOpen();
    await this.redis.set(this.layout.markerKey, p.value);
  }

  async ping(): Promise<boolean> {
    if (this.closed) return false;
    return withTimeout(
      this.pingTimeoutMs + 200,
      async () => {
        try {
          return (await this.pingRedis.ping()) === "PONG";
        } catch {
          return false;
        }
      },
      false,
    );
  }

  async close(): Promise<void> {
    // HTTP: nothing to hold open. Later calls fail clearly.
    this.closed = true;
  }

  private pipeline() {
    this.checkOpen();
    return this.redis.pipeline();
  }

  private checkOpen(): void {
    if (this.closed) throw new Error("due index: the Upstash index is closed");
  }

  /**
   * Runs write batches as pipelines of at most MEMBERS_PER_REQUEST members (one request for
   * any ordinary call), the requests in parallel: each member is in one batch only.
   */
  private async inRequests<T>(
    batches: { key: string; items: T[] }[],
    add: (pipe: ReturnType<Redis["pipeline"]>, b: { key: string; items: T[] }) => void,
  ): Promise<unknown[]> {
    const requests: Promise<unknown[]>[] = [];
    let pipe: ReturnType<Redis["pipeline"]> | undefined;
    let members = 0;
    for (const b of batches) {
      if (pipe && members + b.items.length > MEMBERS_PER_REQUEST) {
        requests.push(pipe.exec());
        pipe = undefined;
      }
      if (!pipe) {
        pipe = this.pipeline();
        members = 0;
      }
      add(pipe, b);
      members += b.items.length;
    }
    if (pipe) requests.push(pipe.exec());
    // Every command's reply, in the order the batches were given.
    return (await Promise.all(requests)).flat();
  }
}
