/** Headers as Fetch gives them, or as Node's http module does. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

export function headerOf(h: HeadersLike, name: string): string | undefined {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? undefined;
  const rec = h as Record<string, string | string[] | undefined>;
  const v = rec[name] ?? Object.entries(rec).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(v) ? v.join(", ") : v;
}

/** A verified call from the scheduler (README "What a webhook target receives"). */
export interface WebhookCall {
  /** webhook-id: the job id, stable across retries: the key for `once`. */
  id: string;
  /** webhook-timestamp, unix seconds. */
  timestamp: number;
  idempotencyKey: string | null;
  /** Scheduler-Attempt: 1, 2, … */
  attempt: number | null;
  attemptId: string | null;
  /** Scheduler-Fencing-Token (never decreases for a job); null when absent. */
  fencingToken: bigint | null;
  scheduledFor: string | null;
  nominalTime: string | null;
  catchup: boolean;
  /** Async jobs: the lease token for heartbeat and complete. */
  leaseToken: string | null;
  /** Async jobs, on a later attempt: the last checkpoint stored, parsed. */
  checkpoint: unknown;
  /** The body exactly as received (what the signature covers). */
  body: string;
  /** The body parsed as JSON (throws on a body that is not JSON). */
  json<T = unknown>(): T;
}

export function callFrom(h: HeadersLike, body: string): WebhookCall {
  const get = (n: string) => headerOf(h, n) ?? null;
  const token = get("scheduler-fencing-token");
  const cp = get("scheduler-checkpoint");
  const attempt = get("scheduler-attempt");
  return {
    id: get("webhook-id") ?? "",
    timestamp: Number(get("webhook-timestamp")),
    idempotencyKey: get("idempotency-key"),
    attempt: attempt === null ? null : Number(attempt),
    attemptId: get("scheduler-attempt-id"),
    fencingToken: token !== null && /^\d{1,20}$/.test(token) ? BigInt(token) : null,
    scheduledFor: get("scheduler-scheduled-for"),
    nominalTime: get("scheduler-nominal-time"),
    catchup: get("scheduler-catchup") === "true",
    leaseToken: get("scheduler-lease-token"),
    checkpoint: cp === null ? null : JSON.parse(Buffer.from(cp, "base64url").toString("utf8")),
    body,
    json: <T>() => JSON.parse(body) as T,
  };
}
