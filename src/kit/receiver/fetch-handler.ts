import type { Sql } from "postgres";
import type { WebhookCall } from "./call.ts";
import { answerVerify, checkWebhook, createReceiver, type Receiver, type ReceiverOptions } from "./core.ts";
import { ReceiverError } from "./errors.ts";

export type WebhookHandle = (call: WebhookCall, req: Request) => unknown | Promise<unknown>;

/** A thrown ReceiverError → its status and JSON; anything else → 500 (the scheduler retries). */
export function errorResponse(err: unknown): Response {
  if (err instanceof ReceiverError) return Response.json(err.toJSON(), { status: err.status });
  return Response.json({ error: { code: "receiver_failed", message: "the webhook handler failed" } }, { status: 500 });
}

/**
 * A plain `(Request) => Response` webhook endpoint (Bun.serve, Deno.serve, Cloudflare,
 * Node with a Fetch adapter): checks the call, then runs `handle`. A Response from `handle`
 * is sent as it is; any other value is sent as JSON (undefined: {"ok": true}).
 */
export function webhookHandler(options: ReceiverOptions | Receiver, handle: WebhookHandle): (req: Request) => Promise<Response> {
  const r = "keys" in options ? options : createReceiver(options);
  return async (req) => {
    try {
      const call = await checkWebhook(r, { headers: req.headers, body: await req.text() });
      const out = await handle(call, req);
      return out instanceof Response ? out : Response.json(out === undefined ? { ok: true } : out);
    } catch (err) {
      return errorResponse(err);
    }
  };
}

/** A plain `(Request) => Response` verify endpoint, answered from the marker table of `once`. */
export function verifyHandler(options: ReceiverOptions | Receiver, sql: Sql): (req: Request) => Promise<Response> {
  const r = "keys" in options ? options : createReceiver(options);
  return async (req) => {
    try {
      const a = await answerVerify(r, sql, req.headers);
      return Response.json(a.body, { status: a.status });
    } catch (err) {
      return errorResponse(err);
    }
  };
}
