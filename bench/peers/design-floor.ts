#!/usr/bin/env bun
/**
 * The design's floor as bench/peers.ts runs it: the loop issue 15 measures the scheduler
 * against (one SKIP LOCKED claim statement per batch of due jobs, the POST, one completion
 * statement per batch of outcomes), with nothing the seeds add to it: no fenced lease, no
 * pre-call check, no attempt log, no signature, no API. No implementation of the design can
 * deliver faster on the same server, target and calls in flight, so it says in every run
 * how far a goal stated against a peer is above what the design itself can do.
 *
 * Its table (made by DesignFloorSystem in systems.ts) has the scheduler's shape of the hot
 * path: the job row stays after completion, due jobs are found through a partial index of
 * scheduled jobs ending in the id (equal due instants of a herd are then distinct keys).
 */
import postgres from "postgres";
import { peerEnv, post, readyUntilSignal, type PeerPayload } from "./post.ts";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("DATABASE_URL is not set");
const { targetUrl, concurrency } = peerEnv();
/** Jobs claimed ahead of the calls (graphile-worker's local queue in bench/peers is 500). */
const CLAIM_BATCH = 500;
/** Outcomes a completion statement carries at most. */
const COMPLETE_BATCH = 200;
/** An idle pass sleeps until the next job is due, at most this long (jobs created meanwhile are found by the next poll). */
const IDLE_MAX_MS = 50;

const sql = postgres(url, { max: 4, onnotice: () => {} });
interface Claimed {
  id: string;
  body: PeerPayload;
}
const queue: Claimed[] = [];
const done: string[] = [];
let stopping = false;
let flushing: Promise<void> = Promise.resolve();

async function complete(): Promise<void> {
  if (!done.length) return;
  const ids = done.splice(0, COMPLETE_BATCH);
  await sql`UPDATE floor_jobs SET status = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL
    WHERE id = ANY(${ids}::bigint[]) AND lease_owner = 'w1'`;
}

function flush(): void {
  flushing = flushing.then(complete);
}

async function call(job: Claimed): Promise<void> {
  try {
    await post(targetUrl, job.body);
    done.push(job.id);
    if (done.length >= COMPLETE_BATCH) flush();
  } catch (err) {
    // The floor has no retry: a failed call is said, and the bench counts the job missing.
    process.stderr.write(`design-floor: call of ${job.body.k} failed: ${(err as Error).message}\n`);
  }
}

/** Until the earliest scheduled job is due, within 1 ms .. IDLE_MAX_MS: no claim statement a millisecond while nothing is due. */
async function untilNextDue(): Promise<number> {
  const [r] = await sql<{ ms: number | null }[]>`SELECT (extract(epoch FROM min(due_at) - now()) * 1000)::float8 AS ms
    FROM floor_jobs WHERE status = 'scheduled'`;
  return Math.min(IDLE_MAX_MS, Math.max(1, Math.ceil(r?.ms ?? IDLE_MAX_MS)));
}

async function loop(): Promise<void> {
  const calls = new Set<Promise<void>>();
  let claimedNone = false;
  while (!stopping) {
    if (queue.length < CLAIM_BATCH) {
      const rows = await sql<Claimed[]>`WITH c AS (
          SELECT id FROM floor_jobs WHERE status = 'scheduled' AND due_at <= now()
          ORDER BY due_at, id LIMIT ${CLAIM_BATCH} FOR UPDATE SKIP LOCKED)
        UPDATE floor_jobs j SET status = 'running', lease_owner = 'w1', lease_generation = j.lease_generation + 1,
          lease_until = now() + interval '30 s', attempts = j.attempts + 1
        FROM c WHERE j.id = c.id RETURNING j.id, j.body`;
      queue.push(...rows);
      claimedNone = rows.length === 0;
    }
    while (queue.length && calls.size < concurrency) {
      const p = call(queue.shift()!).finally(() => calls.delete(p));
      calls.add(p);
    }
    if (calls.size && (queue.length >= CLAIM_BATCH || calls.size >= concurrency)) await Promise.race(calls);
    else if (!calls.size) {
      // Idle: write what is left before sleeping, so a herd's or lag's last outcomes are not held.
      if (done.length) flush();
      await Bun.sleep(claimedNone ? await untilNextDue() : 1);
    } else await Promise.race([...calls, Bun.sleep(1)]);
  }
  await Promise.all(calls);
}

const running = loop();
readyUntilSignal(async () => {
  stopping = true;
  await running;
  while (done.length) {
    flush();
    await flushing;
  }
  await sql.end();
});
