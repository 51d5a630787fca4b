#!/usr/bin/env bun
/**
 * BullMQ as bench/peers.ts runs it: one Worker in this process with our concurrency of 32,
 * the processor POSTs to the target. On Bun, BullMQ takes Bun's own RedisClient through its
 * createBunRedisClient adapter (no ioredis).
 * Completed jobs are removed at once (removeOnComplete, set by the producer), as BullMQ's
 * "going to production" guide recommends so Redis does not fill up.
 */
import { RedisClient } from "bun";
import { createBunRedisClient, Worker } from "bullmq";
import { peerEnv, post, type PeerPayload, readyUntilSignal } from "./post.ts";

const url = process.env.REDIS_URL;
if (!url) throw new Error("REDIS_URL is not set");
const { targetUrl, concurrency, queue } = peerEnv();

const worker = new Worker(queue, async (job) => post(targetUrl, job.data as PeerPayload), {
  connection: createBunRedisClient(new RedisClient(url)),
  concurrency,
});
worker.on("error", (err) => process.stderr.write(`worker error: ${err.message}\n`));
await worker.waitUntilReady();

readyUntilSignal(() => worker.close());
