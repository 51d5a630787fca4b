// A database handle whose transactions stop at a named query: how a test holds one
// transaction at a chosen point while another runs into it.
import type { Db, Queryable, Tx } from "../../src/store/db.ts";
import { queryNameOf } from "../../src/store/sql.ts";

/**
 * `db` whose transactions stop before the named query until `gate` resolves (after
 * `reached()`): a test's way to hold one creation between its insert and its commit.
 */
export function pausedBefore(db: Db, name: string, reached: () => void, gate: Promise<void>): Db {
  const wrapQ = (q: Queryable): Queryable => ({
    query: async <T>(text: string, params?: unknown[]) => {
      if (queryNameOf(text) === name) {
        reached();
        await gate;
      }
      return q.query<T>(text, params);
    },
    exec: (text: string) => q.exec(text),
  });
  const wrap = (q: Tx): Tx => ({ ...wrapQ(q), savepoint: (fn) => q.savepoint((sp) => fn(wrapQ(sp))) });
  return {
    ...db,
    kind: db.kind,
    query: db.query.bind(db),
    exec: db.exec.bind(db),
    tx: (fn) => db.tx((q) => fn(wrap(q))),
    listen: db.listen.bind(db),
    close: db.close.bind(db),
  };
}

/**
 * A transaction on `db` that runs `statement` (taking its row locks) and then stays open,
 * idle, until `release()`: a holder paused in the middle of its transaction. Resolves once the
 * locks are held; `release()` commits and resolves when the transaction has ended.
 */
export async function holdLocks(db: Db, statement: string): Promise<{ release: () => Promise<void> }> {
  let letGo!: () => void;
  const held = new Promise<void>((r) => (letGo = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const tx = db.tx(async (q) => {
    await q.query(statement);
    locked();
    await held;
  });
  await Promise.race([isLocked, tx]);
  return {
    release: async () => {
      letGo();
      await tx;
    },
  };
}
