/**
 * Switching the capture of index changes (migration 004) on and off. The dispatch leader owns
 * the switch: on while it keeps a Redis index, off when it dispatches from SQL alone, so a
 * deployment that stops using Redis does not go on filling an outbox nobody relays.
 */
import type { Db } from "../store/db.ts";
import { sql } from "../store/sql.ts";

const DISCARD_BATCH = 5000;

/** Turns capture on or off; returns true when the setting changed. Turning it off empties the outbox. */
export async function setIndexCapture(db: Db, enabled: boolean): Promise<boolean> {
  const changed = (await db.query(sql("IndexCaptureSet"), [enabled])).length > 0;
  if (!enabled && changed) {
    // Bounded deletes: a large outbox is emptied without one long transaction.
    while ((await db.query<{ id: unknown }>(sql("OutboxDiscard"), [DISCARD_BATCH])).length === DISCARD_BATCH);
  }
  return changed;
}

export async function indexCaptureEnabled(db: Db): Promise<boolean> {
  const [row] = await db.query<{ enabled: boolean }>(sql("IndexCaptureGet"));
  return row?.enabled === true;
}
