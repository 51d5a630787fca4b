#!/usr/bin/env bun
/**
 * graphile-worker as bench/peers.ts runs it: one worker pool in this process, the task POSTs
 * to the target. Settings are those of graphile-worker's performance docs
 * (https://worker.graphile.org/docs/performance): a local queue fetching jobs in batches and
 * batched completions, with our concurrency of 32 calls in flight. pollInterval is lowered
 * from its 2 s default to 100 ms: graphile-worker finds jobs that become due later (the herd
 * and lag scenarios) only by polling, so the default would measure the poll, not the queue.
 */
import { Logger, run } from "graphile-worker";
import { peerEnv, post, readyUntilSignal, type PeerPayload } from "./post.ts";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("DATABASE_URL is not set");
const { targetUrl, concurrency } = peerEnv();

// Warnings and errors only: per-job info lines would cost more than the jobs.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") process.stderr.write(`${level}: ${message}\n`);
});

const runner = await run({
  connectionString: url,
  concurrency,
  noHandleSignals: true,
  pollInterval: 100,
  logger,
  preset: {
    worker: {
      maxPoolSize: concurrency + 1,
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  },
  taskList: {
    post: async (payload) => post(targetUrl, payload as PeerPayload),
  },
});

readyUntilSignal(() => runner.stop());
await runner.promise;
