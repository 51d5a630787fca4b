/**
 * Where the Redis index keeps its entries, shared by both Redis clients:
 *   `${prefix}:due:${shard}`  a sorted set per shard, score = due epoch ms, member = job id
 *   `${prefix}:built`         the built marker (a plain string)
 * shard = the job's dispatch shard (placement "slot": the slot from the id's last 12 bits ×
 * shards / 4096, as SQL computes it, so a dispatcher reads only its shards' sets), or FNV-1a
 * 32-bit of the id mod shards (placement "fnv"). A placement must never change under an index
 * without a rebuild: entries already in Redis would be looked for in the wrong set.
 * Every command names one key (no multi-key DEL), so the layout also works on a cluster.
 */
import { compareDue, type DueChange, type DueEntry } from "./due-index.ts";
import { shardOfJob } from "../store/shards.ts";

export interface RedisLayoutOptions {
  /** Key prefix; default "scheduler". */
  prefix?: string;
  /** Number of sorted sets the entries are spread over, 1..1024; default 8. */
  shards?: number;
  /** How a job finds its set: "slot" (its dispatch shard, as the scheduler uses it) or "fnv"; default "fnv". */
  placement?: "slot" | "fnv";
}

export const SHARDS_MAX = 1024;
/** Members per ZADD/ZREM command: large inputs are split so no reply or request is huge. */
export const MEMBERS_PER_COMMAND = 1000;

export interface RedisLayout {
  readonly prefix: string;
  readonly shards: number;
  readonly markerKey: string;
  /** All shard keys, shard 0 first. */
  readonly shardKeys: readonly string[];
  shardOf(jobId: string): number;
  /** The keys of these shards (all when not given). */
  keysOf(shards?: readonly number[]): readonly string[];
}

export function redisLayout(opts: RedisLayoutOptions = {}): RedisLayout {
  const prefix = opts.prefix ?? "scheduler";
  const shards = opts.shards ?? 8;
  if (typeof prefix !== "string" || prefix.length === 0 || prefix.length > 200 || /\s/.test(prefix)) {
    throw new Error(`due index: prefix must be 1..200 characters without whitespace, got ${JSON.stringify(prefix)}`);
  }
  if (!Number.isInteger(shards) || shards < 1 || shards > SHARDS_MAX) {
    throw new Error(`due index: shards must be an integer in 1..${SHARDS_MAX}, got ${String(shards)}`);
  }
  const shardKeys = Array.from({ length: shards }, (_, i) => `${prefix}:due:${i}`);
  return {
    prefix,
    shards,
    markerKey: `${prefix}:built`,
    shardKeys,
    shardOf: opts.placement === "slot" ? (jobId) => shardOfJob(jobId, shards) : (jobId) => fnv1a32(jobId) % shards,
    keysOf: (only) => (only ? only.filter((i) => i >= 0 && i < shards).map((i) => shardKeys[i]!) : shardKeys),
  };
}

const utf8 = new TextEncoder();

/** FNV-1a, 32 bits, over the UTF-8 bytes of s. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const b of utf8.encode(s)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** One ZADD's worth of entries for one key. */
export interface ShardBatch<T> {
  key: string;
  items: T[];
}

/**
 * Groups entries by shard key, keeping the last due time of a job id named twice, and splits
 * each shard's entries into commands of at most MEMBERS_PER_COMMAND.
 */
export function upsertBatches(layout: RedisLayout, entries: DueEntry[]): ShardBatch<DueEntry>[] {
  const last = new Map<string, DueEntry>();
  for (const e of entries) last.set(e.jobId, e);
  return batchByShard(layout, [...last.values()], (e) => e.jobId);
}

export function changeBatches(layout: RedisLayout, changes: DueChange[]): ShardBatch<DueChange>[] {
  const last = new Map<string, DueChange>();
  for (const c of changes) last.set(c.jobId, c);
  return batchByShard(layout, [...last.values()], (c) => c.jobId);
}

export function removeBatches(layout: RedisLayout, jobIds: string[]): ShardBatch<string>[] {
  return batchByShard(layout, [...new Set(jobIds)], (id) => id);
}

function batchByShard<T>(layout: RedisLayout, items: T[], idOf: (t: T) => string): ShardBatch<T>[] {
  const byShard = new Map<number, T[]>();
  for (const it of items) {
    const s = layout.shardOf(idOf(it));
    let list = byShard.get(s);
    if (!list) byShard.set(s, (list = []));
    list.push(it);
  }
  const out: ShardBatch<T>[] = [];
  for (const [s, list] of [...byShard].sort((a, b) => a[0] - b[0])) {
    for (let i = 0; i < list.length; i += MEMBERS_PER_COMMAND) {
      out.push({ key: layout.shardKeys[s], items: list.slice(i, i + MEMBERS_PER_COMMAND) });
    }
  }
  return out;
}

/** ZADD arguments after the key: score member score member … */
export function zaddArgs(entries: DueEntry[]): string[] {
  const args: string[] = [];
  for (const e of entries) args.push(String(e.dueMs), e.jobId);
  return args;
}

/**
 * Compare and set on one shard's sorted set (KEYS[1]), for triples in ARGV: member, the score
 * it must still have, its new score ("" removes it). Atomic per call (a script runs alone),
 * so a ZADD of a newer state cannot land between the compare and the write. The scores are
 * epoch ms, integers far below 2^53: a double compares them exactly. Returns how many changed.
 * Sent with EVAL by both clients (Bun's RedisClient and @upstash/redis); one key per call, so
 * it also runs on a cluster.
 */
export const COMPARE_AND_SET_SCRIPT = `local n = 0
for i = 1, #ARGV, 3 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i + 1]) then
    if ARGV[i + 2] == '' then redis.call('ZREM', KEYS[1], ARGV[i]) else redis.call('ZADD', KEYS[1], ARGV[i + 2], ARGV[i]) end
    n = n + 1
  end
end
return n`;

/** The script's ARGV: member, expected score, new score or "" … */
export function compareAndSetArgs(changes: DueChange[]): string[] {
  const args: string[] = [];
  for (const c of changes) args.push(c.jobId, String(c.ifDueMs), c.dueMs === null ? "" : String(c.dueMs));
  return args;
}

/** ZRANGE key -inf dueBy BYSCORE LIMIT 0 limit WITHSCORES, arguments after the command. */
export function zrangeDueArgs(key: string, p: { dueBy: number; limit: number }): string[] {
  return [key, "-inf", String(p.dueBy), "BYSCORE", "LIMIT", "0", String(p.limit), "WITHSCORES"];
}

/**
 * Reads a ZRANGE … WITHSCORES reply in either shape: RESP3 gives pairs `[[member, score]]`
 * with numeric scores (Bun's RedisClient); RESP2 and the REST API give a flat
 * `[member, score, member, score]` with scores as strings.
 */
export function parseWithScores(reply: unknown): DueEntry[] {
  if (!Array.isArray(reply)) throw new Error(`due index: ZRANGE WITHSCORES replied ${describe(reply)}, expected an array`);
  const out: DueEntry[] = [];
  if (reply.length > 0 && Array.isArray(reply[0])) {
    for (const pair of reply) {
      if (!Array.isArray(pair) || pair.length !== 2) throw new Error(`due index: ZRANGE WITHSCORES pair is ${describe(pair)}`);
      out.push(entryOf(pair[0], pair[1]));
    }
    return out;
  }
  if (reply.length % 2 !== 0) throw new Error(`due index: ZRANGE WITHSCORES replied an odd-length array (${reply.length})`);
  for (let i = 0; i < reply.length; i += 2) out.push(entryOf(reply[i], reply[i + 1]));
  return out;
}

function entryOf(member: unknown, score: unknown): DueEntry {
  if (typeof member !== "string") throw new Error(`due index: member is ${describe(member)}, expected a string`);
  const dueMs = typeof score === "number" ? score : typeof score === "string" ? Number(score) : NaN;
  if (!Number.isFinite(dueMs)) throw new Error(`due index: score of ${member} is ${describe(score)}, expected a number`);
  return { jobId: member, dueMs };
}

function describe(v: unknown): string {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 80 ? `${s.slice(0, 80)}…` : s;
}

/** Merges per-shard results (each already earliest first) into the first `limit` overall. */
export function mergeDue(perShard: DueEntry[][], limit: number): DueEntry[] {
  return perShard.flat().sort(compareDue).slice(0, limit);
}

/** Reads an integer reply (ZCARD): a number from RESP, maybe a string from elsewhere. */
export function intReply(reply: unknown, what: string): number {
  const n = typeof reply === "number" ? reply : typeof reply === "string" ? Number(reply) : NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`due index: ${what} replied ${describe(reply)}, expected an integer`);
  return n;
}

/** Reads a GET reply: null when missing. */
export function stringOrNull(reply: unknown, what: string): string | null {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === "string") return reply;
  throw new Error(`due index: ${what} replied ${describe(reply)}, expected a string or null`);
}
