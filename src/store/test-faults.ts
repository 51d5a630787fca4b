import type { Db, Queryable, Tx } from "./db.ts";
import { queryNameOf, queryNamesSharingText } from "./sql.ts";

/**
 * Test-only: SCHEDULER_TEST_FAULTS=<Name>=<SQLSTATE>@<probability>[,...] makes the named
 * query (sql("Name")) fail now and then with a real server-side error of that SQLSTATE.
 * The error is raised by the server on the same connection, in the same transaction, right
 * before the query would run, so the caller sees what a real deadlock or lock timeout does:
 * the statement fails and an open transaction is aborted.
 */
export interface TestFault {
  query: string;
  code: string;
  probability: number;
}

const ENTRY = /^(\w+)=([^@]*)@(.*)$/;
const SQLSTATE = /^[0-9A-Z]{5}$/;
const PROBABILITY = /^(0(\.\d+)?|1(\.0+)?|\.\d+)$/;

/** Parses the variable's value; throws one line saying what is wrong with which entry. */
export function parseTestFaults(text: string): TestFault[] {
  const out: TestFault[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const m = ENTRY.exec(entry);
    if (!m) throw new Error(`entry ${JSON.stringify(entry)} must be Name=SQLSTATE@probability, like ExpireCoalesced=40P01@0.2`);
    const [, query, code, p] = m as unknown as [string, string, string, string];
    const names = queryNamesSharingText(query);
    if (names.length === 0) throw new Error(`entry ${JSON.stringify(entry)}: ${query} is not a query name (the "-- name:" lines of sql/queries/*.sql)`);
    if (names.length > 1)
      throw new Error(
        `entry ${JSON.stringify(entry)}: ${query} has the same text as ${names.filter((n) => n !== query).join(", ")}, so a fault cannot tell them apart`,
      );
    if (!SQLSTATE.test(code)) throw new Error(`entry ${JSON.stringify(entry)}: SQLSTATE ${JSON.stringify(code)} must be 5 characters 0-9 or A-Z, like 40P01`);
    // Classes 00-02 are success, warning and no-data, not errors: raising one is refused.
    if (/^0[0-2]/.test(code))
      throw new Error(`entry ${JSON.stringify(entry)}: SQLSTATE ${code} is not an error (classes 00, 01 and 02 are success, warning, no data)`);
    if (!PROBABILITY.test(p)) throw new Error(`entry ${JSON.stringify(entry)}: probability ${JSON.stringify(p)} must be a number from 0 to 1, like 0.05`);
    if (out.some((f) => f.query === query)) throw new Error(`entry ${JSON.stringify(entry)}: ${query} is listed twice`);
    out.push({ query, code, probability: Number(p) });
  }
  return out;
}

/**
 * Test-only: whether the faults are armed now. SCHEDULER_TEST_FAULTS_ARMED=0 starts them
 * disarmed and SIGUSR2 toggles them (src/main.ts), so a test can make one running process's
 * queries fail for a few seconds without restarting it (a restart would end its calls).
 */
export class FaultSwitch {
  constructor(public armed = true) {}

  toggle(): boolean {
    this.armed = !this.armed;
    return this.armed;
  }
}

export interface FaultOptions {
  /** Faults are injected only while it is armed (always, without one). */
  switch?: FaultSwitch;
  /** Called for every fault injected (the metric). */
  onInject?: (query: string, code: string) => void;
  /** [0, 1); a fault is injected when it returns less than the probability. Tests pin it. */
  random?: () => number;
}

/** The statement that fails with `code`; name and code are validated above, so safe to inline. */
export function raiseStatement(query: string, code: string): string {
  return `DO $$BEGIN RAISE EXCEPTION 'injected fault (SCHEDULER_TEST_FAULTS): ${query}' USING ERRCODE = '${code}'; END$$`;
}

/** `db` with the faults armed; `db` itself when there are none. */
export function withTestFaults(db: Db, faults: TestFault[], o: FaultOptions = {}): Db {
  if (faults.length === 0) return db;
  const byName = new Map(faults.map((f) => [f.query, f]));
  const random = o.random ?? Math.random;
  const wrap = (q: Queryable): Queryable => ({
    async query<T>(text: string, params?: unknown[]): Promise<T[]> {
      const name = queryNameOf(text);
      const f = name === undefined ? undefined : byName.get(name);
      if (f && (o.switch?.armed ?? true) && random() < f.probability) {
        o.onInject?.(f.query, f.code);
        await q.exec(raiseStatement(f.query, f.code));
      }
      return q.query<T>(text, params);
    },
    exec: (text) => q.exec(text),
  });
  const wrapTx = (t: Tx): Tx => ({ ...wrap(t), savepoint: (fn) => t.savepoint((s) => fn(wrap(s))) });
  const base = wrap(db);
  return {
    kind: db.kind,
    query: base.query,
    exec: base.exec,
    tx: (fn) => db.tx((t) => fn(wrapTx(t))),
    listen: (channel, onNotify, onListen) => db.listen(channel, onNotify, onListen),
    close: () => db.close(),
  };
}
