/**
 * The one task every peer runs: POST the job's payload to the bench's target, with the job's
 * bench key in the webhook-id header (the scheduler sends its job id there), and fail the job
 * unless the target answered 2xx, so each peer's own retry is what a failure would exercise.
 */
export interface PeerPayload {
  /** The bench's key of this job: what the target records calls by. */
  k: string;
  /** Due time, ms since the epoch (for the record; the peer schedules it itself). */
  due: number;
}

export async function post(targetUrl: string, payload: PeerPayload): Promise<void> {
  const res = await fetch(targetUrl, {
    method: "POST",
    headers: { "content-type": "application/json", "webhook-id": payload.k },
    body: JSON.stringify(payload),
    redirect: "manual",
  });
  await res.arrayBuffer();
  if (res.status < 200 || res.status > 299) throw new Error(`target answered ${res.status}`);
}

/** What a peer worker process reads from its environment (set by bench/peers.ts). */
export function peerEnv(): { targetUrl: string; concurrency: number; queue: string } {
  const targetUrl = process.env.PEER_TARGET_URL;
  const concurrency = Number(process.env.PEER_CONCURRENCY ?? "32");
  const queue = process.env.PEER_QUEUE ?? "bench";
  if (!targetUrl) throw new Error("PEER_TARGET_URL is not set: this process is started by bench/peers.ts");
  return { targetUrl, concurrency, queue };
}

/** Tells the bench we are taking jobs, then stops cleanly on SIGTERM/SIGINT. */
export function readyUntilSignal(stop: () => Promise<void>): void {
  process.stdout.write("ready\n");
  let stopping = false;
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    stop().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`stop failed: ${(err as Error).stack ?? err}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
