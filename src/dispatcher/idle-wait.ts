import type { Queryable } from "../store/db.ts";
import { nextDueAt } from "../store/dispatch-queries.ts";
import type { ShardSet } from "../store/shards.ts";
import type { DbClock } from "../time/db-clock.ts";
import type { DispatchPlanner } from "./dispatch-planner.ts";
import type { DueClaimer } from "./due-claimer.ts";
import type { OccurrenceGeneration } from "./occurrence-generation.ts";

export interface IdleWaitOptions {
  db: Queryable;
  clock: DbClock;
  /** Jobs are claimed this far ahead of their instant. */
  prestageMs: number;
  pollIntervalMs: number;
  generation: OccurrenceGeneration;
  claimer: DueClaimer;
  planner: DispatchPlanner;
  /** The Redis due index, when one is used (its relay wakes the dispatcher). */
  index?: { readonly usable: boolean };
  /** Test seam: the wait after a pass whose claim did not see a job already due (5 ms). */
  notSeenWaitMs?: number;
  /** The shards held now. */
  shards: () => ShardSet;
}

/**
 * How long a dispatcher sleeps after a pass that left no more work at hand: until its own next
 * job or schedule fire (database clock), at most a poll interval, with the cases where a due
 * job was not seen. NOTIFYs and pokes cut the sleep short.
 */
export class IdleWait {
  constructor(private readonly o: IdleWaitOptions) {}

  /** The sleep after a pass begun at `passStartedAt` (performance.now()) whose claim began at `claimStartedAt` (database clock). */
  async after(passStartedAt: number, claimStartedAt: number): Promise<number> {
    const o = this.o;
    // The next fire, unless this pass's generation just read it.
    const [next] = await Promise.all([nextDueAt(o.db, o.shards()), o.generation.readNextFire(passStartedAt)]);
    // Due instants are on the database's clock: the wait until them is measured on it too.
    const dbNow = o.clock.now();
    const nextAt = next.at ?? next.notBefore;
    const jobIn = nextAt ? nextAt.getTime() - o.prestageMs - dbNow : Infinity;
    const fireIn = o.generation.msUntilDue(dbNow);
    const untilNext = Math.min(jobIn, fireIn);
    // A due job that the claim did not see means our clock runs ahead of the database's, or
    // (with a Redis index) that the relay has not added it yet, or that the index missed it
    // and the reconciliation pass will claim it: wait a little rather than spin. The relay
    // wakes us when it adds an entry.
    // Held back by a quota or rate: look again when a token is due, not in a spin.
    const notSeen = o.claimer.held ? Math.max(20, o.planner.msUntilGlobalToken()) : o.index?.usable ? 50 : (o.notSeenWaitMs ?? 5);
    // Unless the job fell due only while the claim ran (a pass started by a poke or a NOTIFY
    // just before a due instant): its claim was too early, not blind. Claim again at once.
    // Waiting the 5 ms made ~15 % of the lag bench's calls 5 ms late (bench/README part 14).
    // Once only: the next pass's claim starts after that due instant. Our clock reads
    // behind the database's, so a job this calls due since the claim began may in truth have
    // been due a little before: one pass more, no spin.
    const dueSinceClaim = untilNext === jobIn && next.at !== undefined && next.at.getTime() - o.prestageMs >= claimStartedAt;
    // Only other shards' jobs read, the last of them due already: their holder is dead or
    // behind (it has NEXT_DUE_LOOK due and unclaimed). Not a job the claim missed: read again
    // from the claim's start for this dispatcher's own next (held back by a quota, it waits
    // for a token).
    const blind = untilNext === jobIn && next.at === undefined && !o.claimer.held;
    if (untilNext > 0) return Math.min(o.pollIntervalMs, untilNext);
    if (dueSinceClaim) return 0;
    return blind ? await this.pastOthersDue(claimStartedAt, fireIn, notSeen) : notSeen;
  }

  /**
   * The wait when the jobs due first are all other dispatchers' and overdue: until this one's
   * own next job, read from when its claim began (one due since then, or one the claim found
   * locked, is due now: a look again soon), or its next schedule fire. Waiting 50 ms between
   * blind looks made its own jobs up to 50 ms late. A job created meanwhile wakes it at its
   * instant (its NOTIFY).
   */
  private async pastOthersDue(claimStartedAt: number, fireIn: number, notSeen: number): Promise<number> {
    const next = await nextDueAt(this.o.db, this.o.shards(), new Date(claimStartedAt));
    const nextAt = next.at ?? next.notBefore;
    const ownIn = nextAt ? nextAt.getTime() - this.o.prestageMs - this.o.clock.now() : Infinity;
    return Math.max(notSeen, Math.min(this.o.pollIntervalMs, ownIn, fireIn));
  }
}
