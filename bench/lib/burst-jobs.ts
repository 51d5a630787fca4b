import type { Queryable } from "../../src/store/db.ts";

/**
 * `n` one-off jobs written straight into `jobs`, as the peers bench makes them through the
 * API: a small JSON body to `url`, 3 attempts, a 30 s limit, time-ordered ids (UUIDv7, as the
 * API gives them, so index entries land where production's do), all due at now() + `dueInMs`
 * on the database's clock (negative: already due).
 */
export async function insertBurst(db: Queryable, n: number, url: string, dueInMs: number): Promise<void> {
  await db.query(
    `INSERT INTO jobs (id, tenant, status, due_at, scheduled_for, target, max_attempts, backoff_base_ms, backoff_max_ms, timeout_ms)
     SELECT g.id, 'bench', 'scheduled', now() + make_interval(secs => $3::float8 / 1000), now(),
       jsonb_build_object('url', $2::text, 'method', 'POST', 'headers', '{}'::jsonb, 'body', '{"k":"' || g.n || '","due":1764690000000}', 'json', true),
       3, 1000, 60000, 30000
     FROM unnest($1::uuid[]) WITH ORDINALITY AS g(id, n)`,
    [Array.from({ length: n }, () => Bun.randomUUIDv7()), url, dueInMs],
  );
}
