/**
 * Switching the capture of index changes (migration 004) on and off. The dispatch leader owns
 * the switch: on while it keeps a Redis index, off when it dispatches from SQL alone, so a
 * deployment that stops using Redis does not go on filling an outbox nobody relays.
 *
 * Turning it on has a gap to close. The trigger reads index_state.enabled inside the writer's
 * transaction: a writer that read "off" and commits after the switch leaves no outbox row, and
 * a rebuild that read the jobs table before that commit misses its change as well; the change
 * would never reach the index. So the switch locks the jobs table in SHARE mode in its own
 * transaction before it sets the flag. SHARE conflicts with the ROW EXCLUSIVE lock that every
 * INSERT and UPDATE of jobs holds until its transaction ends, so the switch:
 *  - waits until every job writer in flight has committed or rolled back: each of those
 *    commits before the switch does, so the rebuild that follows the switch (the keeper
 *    forces one whenever the setting changed) reads its change from the table;
 *  - holds back every writer that comes later until the switch has committed: such a writer
 *    gets its lock after the commit, and its trigger reads index_state with a snapshot taken
 *    after that (READ COMMITTED: each statement of the trigger function takes a fresh one),
 *    sees "on" and appends its outbox row.
 * Either way the change reaches the index. This assumes job writers run at READ COMMITTED, as
 * every one in this code does (a REPEATABLE READ writer whose snapshot predates the switch
 * would read "off"). The cost: writers wait for the switch, at most lock_timeout (1 s) plus one
 * UPDATE, once per switch (a leadership change), and the keeper checks the flag without a
 * lock first, so a switch already on costs nothing. Turning capture off needs no lock: a
 * write missed while going off is what off means.
 */
import type { Db } from "../store/db.ts";
import { indexCaptureGet, indexCaptureLockTimeout, indexCaptureLockWriters, indexCaptureSet, outboxDiscard } from "../store/index-queries.ts";

const DISCARD_BATCH = 5000;

/** Turns capture on or off; returns true when the setting changed. Turning it off empties the outbox. */
export async function setIndexCapture(db: Db, enabled: boolean): Promise<boolean> {
  if (enabled) return captureOn(db);
  const changed = await indexCaptureSet(db, false);
  if (!enabled && changed) {
    // Bounded deletes: a large outbox is emptied without one long transaction.
    while ((await outboxDiscard(db, DISCARD_BATCH)) === DISCARD_BATCH);
  }
  return changed;
}

/**
 * Turns capture on (see above); true when it was off. Whoever turns it on must rebuild the
 * index afterwards: writes committed while it was off are only in the table.
 */
async function captureOn(db: Db): Promise<boolean> {
  if (await indexCaptureEnabled(db)) return false;
  return db.tx(async (q) => {
    await indexCaptureLockTimeout(q);
    await indexCaptureLockWriters(q);
    return indexCaptureSet(q, true);
  });
}

export async function indexCaptureEnabled(db: Db): Promise<boolean> {
  return indexCaptureGet(db);
}
