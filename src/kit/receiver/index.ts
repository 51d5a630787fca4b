// scheduler/receiver: the webhook target's half of exactly-once effects (README
// "Exactly-once effects"). Runs on Bun and Node >= 20; the database parts take a postgres.js
// `sql` connected to the receiver's own database.
export { callFrom, headerOf, type HeadersLike, type WebhookCall } from "./call.ts";
export { answerVerify, checkWebhook, createReceiver, type Receiver, type ReceiverOptions } from "./core.ts";
export { ReceiverError, type ReceiverErrorCode } from "./errors.ts";
export { memoryFencing, pgFencing, type FencingStore } from "./fencing.ts";
export { migrateReceiver, once, onceWithInfo, processedStatus, pruneProcessed, RECEIVER_MIGRATION_SQL, startRetention } from "./markers.ts";
export { errorResponse, verifyHandler, webhookHandler, type WebhookHandle } from "./fetch-handler.ts";
export { honoVerify, honoWebhook, type WebhookEnv } from "./hono.ts";
export { runAsyncJob, type AsyncJobContext, type AsyncJobEnd, type AsyncJobOptions } from "./async-job.ts";
export { decodeSecret } from "./signature.ts";
