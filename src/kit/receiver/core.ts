import type { Sql } from "postgres";
import { callFrom, headerOf, type HeadersLike, type WebhookCall } from "./call.ts";
import { ReceiverError } from "./errors.ts";
import type { FencingStore } from "./fencing.ts";
import { processedStatus } from "./markers.ts";
import { decodeSecret, verifySignature } from "./signature.ts";

export interface ReceiverOptions {
  /** The signing secret(s), "whsec_…". Several while the scheduler rotates keys: any one may match. */
  secrets: string | string[];
  /** How far webhook-timestamp may be from this receiver's clock, seconds (default 300). */
  toleranceSec?: number;
  /** Per-job fencing: refuse a call whose Scheduler-Fencing-Token is below the highest seen (409). */
  fencing?: FencingStore;
  /** This receiver's clock, epoch ms (tests). */
  now?: () => number;
}

/** The options with the secrets decoded once (a bad secret throws here, at start-up). */
export interface Receiver {
  readonly options: ReceiverOptions;
  readonly keys: Buffer[];
}

export function createReceiver(options: ReceiverOptions): Receiver {
  const list = Array.isArray(options.secrets) ? options.secrets : [options.secrets];
  if (list.length === 0) throw new Error("receiver: give at least one signing secret");
  return { options, keys: list.map(decodeSecret) };
}

const asReceiver = (r: Receiver | ReceiverOptions): Receiver => ("keys" in r ? r : createReceiver(r));

function signed(r: Receiver, headers: HeadersLike, body: string): WebhookCall {
  const id = headerOf(headers, "webhook-id");
  const timestamp = headerOf(headers, "webhook-timestamp");
  const signature = headerOf(headers, "webhook-signature");
  if (!id || !timestamp || !signature) {
    throw new ReceiverError("missing_headers", "a scheduler call carries webhook-id, webhook-timestamp and webhook-signature");
  }
  verifySignature({ id, timestamp, signature, body, keys: r.keys, toleranceSec: r.options.toleranceSec ?? 300, nowMs: r.options.now?.() ?? Date.now() });
  return callFrom(headers, body);
}

/**
 * The framework-neutral check of one call: its signature (any configured secret, timestamp
 * within tolerance), then its fencing token. Returns the call, or throws ReceiverError with
 * the status to answer (400, 401, 409).
 */
export async function checkWebhook(r: Receiver | ReceiverOptions, req: { headers: HeadersLike; body: string }): Promise<WebhookCall> {
  const rc = asReceiver(r);
  const call = signed(rc, req.headers, req.body);
  if (rc.options.fencing && call.fencingToken !== null && !(await rc.options.fencing.observe(call.id, call.fencingToken))) {
    throw new ReceiverError(
      "stale_fencing_token",
      `a higher Scheduler-Fencing-Token was already seen for job ${call.id}: this call is from a stale leader or region`,
    );
  }
  return call;
}

/**
 * The verify GET (README "Verify before retry"): checks its signature (over an empty body)
 * and answers from the marker table: 200 {"processed": true, "processed_at"} when `once`
 * committed this webhook-id, else 404 {"processed": false}.
 */
export async function answerVerify(r: Receiver | ReceiverOptions, sql: Sql, headers: HeadersLike): Promise<{ status: number; body: unknown }> {
  const call = signed(asReceiver(r), headers, "");
  const s = await processedStatus(sql, call.id);
  return { status: s.processed ? 200 : 404, body: s };
}
