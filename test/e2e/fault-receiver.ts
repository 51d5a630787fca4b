// A receiver process built with scheduler/receiver, for the end-to-end tests: it records
// every call it gets (before its effect, autocommit) and can fail on purpose on a job's first
// call, as its body says: "kill_after_commit" (SIGKILL itself once the effect committed,
// before answering) or "slow_after_commit" (answer SLOW_MS after the commit).
// Env: DATABASE_URL (the receiver's own database), WEBHOOK_SECRET, PORT, SLOW_MS.
import postgres from "postgres";
import { createReceiver, migrateReceiver, onceWithInfo, pgFencing, verifyHandler, webhookHandler } from "scheduler/receiver";

const sql = postgres(process.env.DATABASE_URL!, { onnotice: () => {} });
await migrateReceiver(sql);
await sql`CREATE TABLE IF NOT EXISTS effects (webhook_id text NOT NULL, n serial, at timestamptz DEFAULT now())`;
// Each call as received (headers and body), so a test can replay one later.
await sql`CREATE TABLE IF NOT EXISTS calls (webhook_id text NOT NULL, kind text NOT NULL, attempt int, token numeric, headers jsonb, body text, at timestamptz DEFAULT now())`;
const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!, fencing: pgFencing(sql) });
const slowMs = Number(process.env.SLOW_MS ?? 2000);

const hook = webhookHandler(receiver, async (call, req) => {
  const headers = Object.fromEntries(req.headers);
  await sql`INSERT INTO calls (webhook_id, kind, attempt, token, headers, body) VALUES (${call.id}, 'call', ${call.attempt}, ${String(call.fencingToken)}, ${sql.json(headers)}, ${call.body})`;
  const { fault } = call.json<{ fault?: string }>();
  const { result, replayed } = await onceWithInfo(sql, call.id, async (tx) => {
    await tx`INSERT INTO effects (webhook_id) VALUES (${call.id})`;
    return { done: call.id };
  });
  if (!replayed && fault === "kill_after_commit") process.kill(process.pid, "SIGKILL");
  if (!replayed && fault === "slow_after_commit") await Bun.sleep(slowMs);
  return result;
});
const verify = verifyHandler(receiver, sql);

Bun.serve({
  hostname: "127.0.0.1",
  port: Number(process.env.PORT),
  idleTimeout: 0,
  fetch: async (req) => {
    if (req.method !== "GET") return hook(req);
    await sql`INSERT INTO calls (webhook_id, kind) VALUES (${req.headers.get("webhook-id") ?? ""}, 'verify')`;
    return verify(req);
  },
});
console.log(JSON.stringify({ msg: "receiver started" }));
