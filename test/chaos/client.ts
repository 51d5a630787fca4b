/**
 * The harness's HTTP client for the scheduler API: sends to the home region's API and follows
 * `fly-replay` to another region, as the Fly proxy would. One request, no retries here; the
 * callers retry what is safe to retry (creations carry an idempotency key).
 */
export interface ApiAnswer {
  status: number;
  body: any;
}

export class ApiClient {
  /** Where writes went last: the region that answered without fly-replay. */
  home = "a";

  constructor(private readonly apis: () => Map<string, string>) {}

  /** null: no answer (connection refused or reset, timeout). */
  async request(method: string, path: string, body?: unknown, timeoutMs = 5000): Promise<ApiAnswer | null> {
    let region = this.home;
    for (let hop = 0; hop < 3; hop++) {
      const base = this.apis().get(region);
      if (!base) return null;
      let res: Response;
      try {
        res = await fetch(base + path, {
          method,
          headers: { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch {
        return null;
      }
      const replay = /region=([a-z0-9-]+)/.exec(res.headers.get("fly-replay") ?? "")?.[1];
      if (res.status === 409 && replay && replay !== region) {
        await res.body?.cancel();
        region = replay;
        continue;
      }
      this.home = region;
      const text = await res.text().catch(() => "");
      let json: unknown = text;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON
      }
      return { status: res.status, body: json };
    }
    return null;
  }
}
