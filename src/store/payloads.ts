import { createHash } from "node:crypto";
import type { Queryable } from "./db.ts";
import { sql } from "./sql.ts";
import type { Target } from "./types.ts";

/** A body stored once in `payloads`, named by its content: "sha256:<hex>". */
export interface Payload {
  ref: string;
  bytes: Uint8Array;
}

export const PAYLOAD_REF = /^sha256:[0-9a-f]{64}$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function payloadOf(body: string): Payload {
  const bytes = encoder.encode(body);
  return { ref: `sha256:${createHash("sha256").update(bytes).digest("hex")}`, bytes };
}

/**
 * The stored form of a target: a body over `inlineMax` bytes leaves the row (which every
 * claim, retry, listing and occurrence copies) for the payloads table; the row keeps its hash
 * and size. Smaller bodies stay inline.
 */
export function externalize(t: Target, inlineMax: number): { target: Target; payload?: Payload } {
  if (t.body === null || t.body_ref) return { target: t };
  // Cheap bound first: a UTF-8 string has at least as many bytes as UTF-16 units.
  if (t.body.length <= inlineMax / 3) return { target: t };
  const payload = payloadOf(t.body);
  if (payload.bytes.length <= inlineMax) return { target: t };
  return { target: { ...t, body: null, body_ref: payload.ref, body_size: payload.bytes.length }, payload };
}

/** Stores payloads in the caller's transaction, alongside the rows that reference them: one statement. */
export async function storePayloads(q: Queryable, payloads: Payload[]): Promise<void> {
  const byRef = new Map(payloads.map((p) => [p.ref, p]));
  if (byRef.size === 0) return;
  const list = [...byRef.values()].sort((a, b) => (a.ref < b.ref ? -1 : 1));
  await q.query(sql("StorePayloads"), [
    list.map((p) => p.ref),
    list.map((p) => p.bytes.length),
    list.map((p) => Buffer.from(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength).toString("hex")),
  ]);
}

/** The body text of a stored payload; undefined when it is not there. */
export async function loadPayload(q: Queryable, ref: string): Promise<string | undefined> {
  const row = (await q.query<{ body: Uint8Array }>(sql("GetPayload"), [ref]))[0];
  return row ? decoder.decode(row.body) : undefined;
}
