export interface Created {
  /** job id → due_at as the API stored it (ms since the epoch). */
  due: Map<string, number>;
  /** Jobs whose batch answered only after they were already due. */
  createdLate: number;
  startedAt: number;
  endedAt: number;
}

interface BatchItem {
  id?: string;
  due_at?: string;
  error?: { code: string; message: string; path?: string };
}

/**
 * Creates one job per due time through POST /v1/jobs/batch, `batch` jobs per request,
 * `parallel` requests in flight. Every job calls `targetUrl` with a small JSON body.
 */
export async function createJobs(p: {
  schedulerUrl: string;
  targetUrl: string;
  dueTimes: number[];
  batch: number;
  parallel: number;
  tag: string;
}): Promise<Created> {
  const due = new Map<string, number>();
  let createdLate = 0;
  const startedAt = Date.now();
  const chunks: number[][] = [];
  for (let i = 0; i < p.dueTimes.length; i += p.batch) chunks.push(p.dueTimes.slice(i, i + p.batch));
  let next = 0;
  const worker = async () => {
    while (next < chunks.length) {
      const c = next++;
      const body = JSON.stringify({
        jobs: chunks[c].map((at, i) => ({
          target: { url: p.targetUrl, body: { bench: p.tag, n: c * p.batch + i } },
          run_at: new Date(at).toISOString(),
        })),
      });
      const res = await fetch(`${p.schedulerUrl}/v1/jobs/batch`, { method: "POST", headers: { "content-type": "application/json" }, body });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`POST /v1/jobs/batch answered ${res.status}: ${text.slice(0, 500)}`);
      const answeredAt = Date.now();
      const items = (JSON.parse(text) as { jobs: BatchItem[] }).jobs;
      if (items.length !== chunks[c].length) throw new Error(`POST /v1/jobs/batch returned ${items.length} jobs for ${chunks[c].length}`);
      for (const item of items) {
        if (!item.id || !item.due_at) throw new Error(`a job was refused: ${JSON.stringify(item.error ?? item)}`);
        const at = Date.parse(item.due_at);
        due.set(item.id, at);
        if (at < answeredAt) createdLate++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(p.parallel, chunks.length) }, worker));
  return { due, createdLate, startedAt, endedAt: Date.now() };
}
