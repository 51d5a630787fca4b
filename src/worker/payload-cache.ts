import type { Queryable } from "../store/db.ts";
import { loadPayload } from "../store/payloads.ts";
import type { ClaimedJob } from "../store/types.ts";
import type { DeliveryResult } from "./deliver.ts";

export interface PayloadCacheOptions {
  /** Bodies kept in memory at most, in bytes (UTF-8 size). */
  maxBytes?: number;
  /** How long a loaded body is reused: retries and occurrences of one schedule share it. */
  ttlMs?: number;
}

/**
 * Bodies stored apart (target.body_ref), loaded by hash when a call needs them. Content never
 * changes under a hash, so a cached body is never stale; the TTL and byte cap only bound
 * memory. Concurrent calls for one hash share one load.
 */
export class PayloadCache {
  private readonly entries = new Map<string, { body: string; size: number; until: number }>();
  private readonly loading = new Map<string, Promise<string | undefined>>();
  private bytes = 0;
  private readonly maxBytes: number;
  private readonly ttlMs: number;

  constructor(
    private readonly db: Queryable,
    o: PayloadCacheOptions = {},
  ) {
    this.maxBytes = o.maxBytes ?? 64 * 1024 * 1024;
    this.ttlMs = o.ttlMs ?? 30_000;
  }

  /** The body text, or undefined when no payload has this hash. */
  async get(ref: string, size: number): Promise<string | undefined> {
    const now = Date.now();
    const hit = this.entries.get(ref);
    if (hit && hit.until > now) return hit.body;
    if (hit) this.drop(ref);
    let p = this.loading.get(ref);
    if (!p) {
      p = loadPayload(this.db, ref).finally(() => this.loading.delete(ref));
      this.loading.set(ref, p);
    }
    const body = await p;
    // One body may take at most a quarter of the cache, so a few large ones cannot evict all.
    if (body !== undefined && size <= this.maxBytes / 4 && !this.entries.has(ref)) {
      this.entries.set(ref, { body, size, until: now + this.ttlMs });
      this.bytes += size;
      for (const k of this.entries.keys()) {
        if (this.bytes <= this.maxBytes) break;
        this.drop(k);
      }
    }
    return body;
  }

  private drop(ref: string): void {
    const e = this.entries.get(ref);
    if (!e) return;
    this.entries.delete(ref);
    this.bytes -= e.size;
  }
}

/**
 * The job as it is to be sent: a body stored apart is loaded into its target. A payload that
 * is gone is a permanent failure (retrying cannot bring it back); a failed load is transient.
 */
export async function withBody(job: ClaimedJob, cache: PayloadCache): Promise<{ job: ClaimedJob } | { result: DeliveryResult }> {
  const ref = job.target.body_ref;
  if (!ref) return { job };
  const at = new Date();
  const notSent = (r: Pick<DeliveryResult, "outcome" | "error"> & { deadReason?: string }): { result: DeliveryResult } => ({
    result: { httpStatus: null, possiblyDelivered: false, retryAfterMs: null, refused: false, startedAt: at, finishedAt: new Date(), ...r },
  });
  try {
    const body = await cache.get(ref, job.target.body_size ?? 0);
    if (body === undefined) return notSent({ outcome: "permanent", error: `payload_missing: ${ref}`, deadReason: "payload_missing" });
    return { job: { ...job, target: { ...job.target, body } } };
  } catch (err) {
    return notSent({ outcome: "transient", error: `not called: loading the body (${ref}) failed: ${(err as Error).message}` });
  }
}
