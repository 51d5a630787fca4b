import type { Context, MiddlewareHandler } from "hono";
import type { Sql } from "postgres";
import type { WebhookCall } from "./call.ts";
import { answerVerify, checkWebhook, createReceiver, type Receiver, type ReceiverOptions } from "./core.ts";
import { errorResponse } from "./fetch-handler.ts";

export type WebhookEnv = { Variables: { webhook: WebhookCall } };

/**
 * Hono middleware: checks the call (signature, timestamp, fencing) and puts it in
 * `c.var.webhook` for the route; a refused call is answered here (400, 401, 409).
 */
export function honoWebhook(options: ReceiverOptions | Receiver): MiddlewareHandler<WebhookEnv> {
  const r = "keys" in options ? options : createReceiver(options);
  return async (c, next) => {
    let call: WebhookCall;
    try {
      call = await checkWebhook(r, { headers: c.req.raw.headers, body: await c.req.text() });
    } catch (err) {
      return errorResponse(err);
    }
    c.set("webhook", call);
    await next();
  };
}

/** Hono route handler for the verify GET, answered from the marker table of `once`. */
export function honoVerify(options: ReceiverOptions | Receiver, sql: Sql): (c: Context) => Promise<Response> {
  const r = "keys" in options ? options : createReceiver(options);
  return async (c) => {
    try {
      const a = await answerVerify(r, sql, c.req.raw.headers);
      return c.json(a.body as object, a.status as 200 | 404);
    } catch (err) {
      return errorResponse(err);
    }
  };
}
