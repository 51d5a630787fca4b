import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Lease tokens of async jobs: `v1.<generation>.<base64url HMAC-SHA256(lease_key, "<job id>.<generation>")>`.
 * The key is a per-job secret kept in the database (jobs.lease_key), so a token names one
 * job and one attempt's lease generation, and nobody who knows only the job id (an API
 * reader, a log) can make one. Any process that can read the job verifies it: no shared
 * server secret to configure.
 */
export function makeLeaseToken(leaseKey: string, jobId: string, gen: number): string {
  return `v1.${gen}.${mac(leaseKey, jobId, gen)}`;
}

const TOKEN = /^v1\.(\d{1,10})\.([A-Za-z0-9_-]{43})$/;

/** The generation a token claims, before it is checked; undefined when it is not one of ours. */
export function tokenGeneration(token: string): number | undefined {
  const m = TOKEN.exec(token);
  return m ? Number(m[1]) : undefined;
}

/** True when `token` was made for this job (any generation) with its key. */
export function verifyLeaseToken(token: string, leaseKey: string | null, jobId: string): boolean {
  const m = TOKEN.exec(token);
  if (!m || !leaseKey) return false;
  const want = Buffer.from(mac(leaseKey, jobId, Number(m[1])));
  const got = Buffer.from(m[2]);
  return want.length === got.length && timingSafeEqual(want, got);
}

function mac(leaseKey: string, jobId: string, gen: number): string {
  return createHmac("sha256", leaseKey).update(`${jobId}.${gen}`).digest("base64url");
}
