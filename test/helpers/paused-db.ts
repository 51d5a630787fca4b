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
