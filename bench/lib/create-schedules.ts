import type { Created } from "./create-jobs.ts";

/**
 * Creates `count` schedules through POST /v1/schedules (one a request: the API has no batch
 * of schedules), `parallel` requests in flight, each firing daily at the whole second `at`
 * (UTC, a six-field rule), so their next occurrences are all due at that one instant. Each
 * calls `targetUrl` with a small JSON body. `due` is keyed by the occurrence's
 * Idempotency-Key, `<schedule id>@<nominal time>`: the key its call carries, known before
 * the occurrence's job exists.
 */
export async function createSchedules(p: {
  schedulerUrl: string;
  targetUrl: string;
  count: number;
  at: number;
  overlap: "allow" | "skip" | "queue";
  parallel: number;
  tag: string;
}): Promise<Created> {
  if (p.at % 1000 !== 0) throw new Error("createSchedules: the instant must be a whole second");
  const t = new Date(p.at);
  const cron = `${t.getUTCSeconds()} ${t.getUTCMinutes()} ${t.getUTCHours()} * * *`;
  const nominal = t.toISOString();
  const due = new Map<string, number>();
  let createdLate = 0;
  const startedAt = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < p.count) {
      const id = `${p.tag}-${next++}`;
      const body = JSON.stringify({ id, cron, timezone: "UTC", overlap: p.overlap, target: { url: p.targetUrl, body: { bench: p.tag, id } } });
      const res = await fetch(`${p.schedulerUrl}/v1/schedules`, { method: "POST", headers: { "content-type": "application/json" }, body });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`POST /v1/schedules answered ${res.status}: ${text.slice(0, 500)}`);
      const fire = (JSON.parse(text) as { next_fire_at?: string }).next_fire_at;
      // A schedule made after its instant would fire tomorrow: the run would wait for nothing.
      if (fire !== nominal) throw new Error(`schedule ${id}: next_fire_at ${fire}, not ${nominal} (raise --lead?)`);
      due.set(`${id}@${nominal}`, p.at);
      if (p.at < Date.now()) createdLate++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(p.parallel, p.count) }, worker));
  return { due, createdLate, startedAt, endedAt: Date.now() };
}
