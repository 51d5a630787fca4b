import type { Db } from "../store/db.ts";
import { type Claimed, releaseUncalled } from "../store/worker-queries.ts";
import type { Logger } from "../obs/log.ts";

export interface GiveBackDeps {
  db: Db;
  owner: string;
  leaseTtlMs: number;
  log: Logger;
  /** The worker is stopping: cut the retries short. */
  stopping: () => boolean;
}

/**
 * Jobs whose pre-call check got no answer: back by owner and generation, retried until that
 * succeeds or their lease has lapsed (no longer renewed: the reaper has them then; a give-back
 * that comes later matches nothing). A stop cuts the retries short.
 */
export async function giveBackUncalled(d: GiveBackDeps, jobs: Claimed[]): Promise<void> {
  const until = Date.now() + d.leaseTtlMs;
  for (let n = 1; ; n++) {
    try {
      const rows = await releaseUncalled(d.db, d.owner, jobs);
      d.log.warn({ jobs: jobs.length, given_back: rows.length }, "pre-call check failed: jobs given back uncalled, without a try");
      return;
    } catch (err) {
      if (Date.now() >= until || d.stopping()) {
        d.log.error({ err, jobs: jobs.length }, "giving back jobs whose pre-call check failed did not succeed; their leases will lapse");
        return;
      }
      d.log.warn({ err, attempt: n }, "giving back jobs whose pre-call check failed; retrying");
      await Bun.sleep(Math.min(1000, 50 * 2 ** n));
    }
  }
}
