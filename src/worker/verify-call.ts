import type { ClaimedJob } from "../store/types.ts";
import { signatureHeader } from "./signature.ts";
import { pinTarget, type PinnedCall } from "./pinned-target.ts";

/** What a verify URL said about a call: processed, not processed, or nothing usable. */
export type VerifyAnswer = { result: "processed" | "not_processed" | "error"; detail: string };

export interface VerifyCallOptions {
  /** The keys the job's calls are signed with (its schedule's, its tenant's, or the fallback). */
  signingKeys?: readonly Uint8Array[];
  allowPrivateTargets: boolean;
  timeoutMs: number;
  signal?: AbortSignal;
}

const MAX_ANSWER_BYTES = 64 * 1024;

/** The Idempotency-Key a call of this job carries (README "What a webhook target receives"), which the verify GET repeats. */
export function idempotencyKeyOf(job: Pick<ClaimedJob, "id" | "idempotency_key" | "schedule_id" | "nominal_time">): string {
  return job.idempotency_key ?? (job.schedule_id && job.nominal_time ? `${job.schedule_id}@${job.nominal_time.toISOString()}` : job.id);
}

/** The verify GET's headers: the call's identity, signed over an empty body with the call's keys (README "Verify before retry"). */
export function verifyHeaders(job: ClaimedJob, signingKeys: readonly Uint8Array[] | undefined, nowMs: number): Record<string, string> {
  const ts = Math.floor(nowMs / 1000);
  const h: Record<string, string> = {
    "webhook-id": job.id,
    "webhook-timestamp": String(ts),
    "idempotency-key": idempotencyKeyOf(job),
    accept: "application/json",
    "user-agent": "scheduler-webhooks/0.1",
  };
  const sig = signingKeys && signatureHeader(signingKeys, job.id, ts, "");
  if (sig) h["webhook-signature"] = sig;
  return h;
}

/**
 * Asks `GET <verify_url>` whether the call with this job's webhook-id was processed. Never
 * throws: a refused URL, an error, a timeout or an answer of another shape is "error", and
 * the caller retries as it would have without asking.
 */
export async function askVerify(job: ClaimedJob, url: string, o: VerifyCallOptions): Promise<VerifyAnswer> {
  let call: PinnedCall;
  try {
    // Same guard as a call: a verify URL on a private address is refused unless allowed, and
    // the GET connects to the address that was checked (no DNS rebinding in between).
    call = await pinTarget(url, o.allowPrivateTargets);
  } catch (err) {
    return { result: "error", detail: `verify url refused: ${(err as Error).message}` };
  }
  const timeout = AbortSignal.timeout(o.timeoutMs);
  try {
    const headers = verifyHeaders(job, o.signingKeys, Date.now());
    if (call.host) headers.host = call.host;
    const res = await fetch(call.url, {
      method: "GET",
      headers,
      redirect: "manual",
      signal: o.signal ? AbortSignal.any([timeout, o.signal]) : timeout,
      ...(call.tls ? { tls: call.tls } : {}),
    });
    const text = await boundedText(res);
    if (res.status === 404) return { result: "not_processed", detail: "HTTP 404" };
    if (res.status !== 200) return { result: "error", detail: `HTTP ${res.status}` };
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return { result: "error", detail: "HTTP 200 without a JSON body" };
    }
    const processed = body && typeof body === "object" ? (body as { processed?: unknown }).processed : undefined;
    if (processed === true) return { result: "processed", detail: "HTTP 200 processed" };
    if (processed === false) return { result: "not_processed", detail: "HTTP 200 not processed" };
    return { result: "error", detail: 'HTTP 200 without a boolean "processed"' };
  } catch (err) {
    return { result: "error", detail: timeout.aborted ? "verify timed out" : `verify failed: ${(err as Error).message}` };
  }
}

async function boundedText(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const parts: Uint8Array[] = [];
  let seen = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.byteLength;
    if (seen > MAX_ANSWER_BYTES) {
      await reader.cancel();
      return "";
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString("utf8");
}
