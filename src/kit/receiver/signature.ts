import { createHmac, timingSafeEqual } from "node:crypto";
import { ReceiverError } from "./errors.ts";

/**
 * Standard Webhooks verification (https://www.standardwebhooks.com/), written here rather
 * than taken from the `standardwebhooks` package: that one fixes the timestamp tolerance at
 * 5 minutes and takes one secret, and we need both as settings (rotation: several secrets).
 */

const PREFIX = "whsec_";

/** "whsec_<base64>" → key bytes; throws a plain Error naming what is wrong (a setup mistake). */
export function decodeSecret(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new Error('a webhook secret must be "whsec_" followed by base64 key bytes');
  const key = Buffer.from(encoded, "base64");
  if (key.length === 0) throw new Error("a webhook secret decodes to an empty key");
  return key;
}

export interface SignatureCheck {
  id: string;
  /** webhook-timestamp, unix seconds, as sent. */
  timestamp: string;
  /** webhook-signature: space-separated "v1,<base64>" entries (one per active key of the sender). */
  signature: string;
  body: string;
  keys: Buffer[];
  toleranceSec: number;
  nowMs: number;
}

/** Throws ReceiverError unless the timestamp is within tolerance and a v1 signature matches a key. */
export function verifySignature(c: SignatureCheck): void {
  const ts = Number(c.timestamp);
  if (!/^\d{1,12}$/.test(c.timestamp) || Math.abs(c.nowMs / 1000 - ts) > c.toleranceSec) {
    throw new ReceiverError("timestamp_out_of_range", `webhook-timestamp is not within ${c.toleranceSec} s of this receiver's clock`);
  }
  const given = c.signature.split(" ").flatMap((part) => {
    const [version, mac] = part.split(",", 2);
    return version === "v1" && mac ? [Buffer.from(mac, "base64")] : [];
  });
  for (const key of c.keys) {
    const expected = createHmac("sha256", key).update(`${c.id}.${c.timestamp}.${c.body}`, "utf8").digest();
    if (given.some((g) => g.length === expected.length && timingSafeEqual(g, expected))) return;
  }
  throw new ReceiverError("invalid_signature", "no webhook-signature matches a configured secret");
}
