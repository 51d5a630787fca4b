// A webhook target whose effect happens exactly once (README "Exactly-once effects").
// DATABASE_URL=postgres://… WEBHOOK_SECRET=whsec_… PORT=3000 bun examples/receiver.ts
import postgres from "postgres";
import { createReceiver, migrateReceiver, once, pgFencing, verifyHandler, webhookHandler } from "scheduler/receiver";

const sql = postgres(process.env.DATABASE_URL!);
await migrateReceiver(sql); // the processed-marker and fencing tables
await sql`CREATE TABLE IF NOT EXISTS charges (webhook_id text PRIMARY KEY, amount int NOT NULL)`;

// Several secrets while the scheduler rotates keys; a stale fencing token gets 409.
const receiver = createReceiver({ secrets: process.env.WEBHOOK_SECRET!.split(" "), fencing: pgFencing(sql) });

// The effect and the processed marker commit together: a repeat returns the first result.
const hook = webhookHandler(receiver, (call) =>
  once(sql, call.id, async (tx) => {
    const { amount } = call.json<{ amount: number }>();
    await tx`INSERT INTO charges (webhook_id, amount) VALUES (${call.id}, ${amount})`;
    return { charged: amount };
  }),
);
const verify = verifyHandler(receiver, sql); // GET: {"processed": true} once committed

Bun.serve({ port: Number(process.env.PORT ?? 3000), fetch: (req) => (req.method === "GET" ? verify(req) : hook(req)) });
