// The process under test for postgres-connection-loss.test.ts: it uses our postgres.js
// driver while its connections' backends die, in a process of its own, so that an uncaught
// exception in the driver (porsager/postgres#1066, #1154, #1208: a write to the null socket
// of a closed connection, thrown from a setImmediate) is seen as this process's exit, not
// as the test runner dying. It prints one JSON line per step on stdout and exits 0 when
// every step went as the scenario expects; a step that hangs ends it with code 3.
//
//   bun test/store/connection-loss-child.ts <scenario>     (DATABASE_URL in the environment)
//
// Scenarios:
//   tx-killed-mid-statement     a db.tx whose backend is terminated while its statement runs
//   tx-killed-between-statements  …terminated between two statements; the transaction's
//                               code then issues another one on its dead handle
//   tx-handle-after-reconnect   …and issues an INSERT on its dead handle after the pool has
//                               reconnected the same connection for another query
//   tx-loop                     short transactions in a loop (and one long one) until "stop"
//                               on stdin, for the test that restarts the server under it
import pino from "pino";
import postgres from "postgres";
import { installProcessGuards } from "../../src/obs/process-guards.ts";
import { openPostgres } from "../../src/store/postgres-driver.ts";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("DATABASE_URL is not set");
const scenario = process.argv[2];
const APP = "conn-loss-child";

const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
const codeOf = (e: unknown) => String((e as { code?: unknown })?.code ?? (e as Error)?.message ?? e);

/** A step that neither resolves nor rejects is a failure too: the query was dropped. */
async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hung: ${what} not settled after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, hung]);
  } catch (e) {
    if ((e as Error).message?.startsWith("hung:")) {
      say({ step: "hung", what });
      process.exit(3);
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

const settled = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, code: codeOf(error) }),
  );

/** This process's own connection, outside the pool under test: it kills and watches. */
const admin = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: "conn-loss-admin" } });

async function waitUntil(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

/** pg_terminate_backend, then until the backend is gone from pg_stat_activity. */
async function terminate(pid: number): Promise<void> {
  await admin`select pg_terminate_backend(${pid})`;
  await waitUntil(`backend ${pid} to exit`, async () => (await admin`select 1 from pg_stat_activity where pid = ${pid}`).length === 0);
}

/** The pool after the loss: sequential transactions and more concurrent queries than connections. */
async function poolServes(db: ReturnType<typeof openPostgres>, deadPid: number): Promise<void> {
  for (let i = 0; i < 4; i++) {
    const r = await within(
      10_000,
      `transaction ${i} after the loss`,
      db.tx((q) => q.query<{ n: number }>("select $1::int as n", [i])),
    );
    if (r[0]?.n !== i) throw new Error(`transaction ${i} returned ${JSON.stringify(r)}`);
  }
  const pids = await within(
    10_000,
    "concurrent queries after the loss",
    Promise.all(Array.from({ length: 6 }, () => db.query<{ pid: number }>("select pg_backend_pid() as pid, pg_sleep(0.05)"))),
  );
  const seen = new Set(pids.map((r) => r[0]!.pid));
  if (seen.has(deadPid)) throw new Error(`a query was answered by the terminated backend ${deadPid}`);
  say({ step: "pool serves", backends: seen.size });
}

async function txKilledMidStatement(): Promise<void> {
  const db = openPostgres({ url: url!, maxConnections: 2, applicationName: APP });
  let pid = 0;
  let inner: { ok: boolean; code?: string } | undefined;
  const tx = settled(
    db.tx(async (q) => {
      pid = (await q.query<{ pid: number }>("select pg_backend_pid() as pid"))[0]!.pid;
      // Settled (a handler attached) at once: the statement rejects as soon as the driver
      // sees the close, which may be before terminate() has seen the backend gone, and an
      // unhandled rejection would end this process with code 1.
      const sleeping = settled(q.query("select pg_sleep(30)"));
      await waitUntil(
        "the statement to run",
        async () => (await admin`select 1 from pg_stat_activity where pid = ${pid} and state = 'active' and query like '%pg_sleep(30)%'`).length > 0,
      );
      await terminate(pid);
      inner = await sleeping;
      if (!inner.ok) throw new Error(`statement failed: ${inner.code}`);
    }),
  );
  const outcome = await within(10_000, "the transaction", tx);
  // The driver rejects the transaction when it sees the close, maybe before the code inside
  // it has seen its statement fail: wait for that too.
  await waitUntil("the statement to settle", async () => inner !== undefined);
  say({ step: "tx settled", ok: outcome.ok, code: outcome.ok ? undefined : outcome.code, statement: inner?.code });
  if (outcome.ok) throw new Error("the transaction committed although its backend was terminated");
  // Let every timer and immediate queued by the loss run: the crash came from one of them.
  await Bun.sleep(100);
  await poolServes(db, pid);
  await db.close();
}

async function txKilledBetweenStatements(): Promise<void> {
  const db = openPostgres({ url: url!, maxConnections: 2, applicationName: APP });
  let pid = 0;
  let late: { ok: boolean; code?: string } | undefined;
  let sawClose!: () => void;
  const closeSeen = new Promise<void>((r) => (sawClose = r));
  const txPromise = db.tx(async (q) => {
    pid = (await q.query<{ pid: number }>("select pg_backend_pid() as pid"))[0]!.pid;
    await terminate(pid);
    // The driver rejects the transaction as soon as it sees the connection close; only then
    // does the transaction's code, as ours does (the generator's stillUsable), try its
    // handle again.
    await closeSeen;
    late = await within(10_000, "a statement on the dead transaction", settled(q.query("select 1")));
    if (!late.ok) throw new Error(`statement failed: ${late.code}`);
  });
  const tx = settled(txPromise.finally(() => sawClose()));
  const outcome = await within(10_000, "the transaction", tx);
  // The transaction's code runs on after the driver rejected it: wait for its late statement.
  await waitUntil("the late statement to settle", async () => late !== undefined);
  say({ step: "tx settled", ok: outcome.ok, code: outcome.ok ? undefined : outcome.code, late: late?.ok ? "ok" : late?.code });
  if (outcome.ok) throw new Error("the transaction committed although its backend was terminated");
  if (late?.ok) throw new Error("a statement of the dead transaction succeeded");
  await Bun.sleep(100);
  await poolServes(db, pid);
  await db.close();
}

/**
 * A transaction whose connection died, and whose code goes on using its handle after the
 * pool has reconnected that very connection (one connection in the pool) for another query:
 * the handle's INSERT must be rejected, not run on the new session outside any transaction.
 */
async function txHandleAfterReconnect(): Promise<void> {
  await admin`create table if not exists conn_loss_rows (id int)`;
  const db = openPostgres({ url: url!, maxConnections: 1, applicationName: APP });
  let pid = 0;
  let late: { ok: boolean; code?: string } | undefined;
  let sawClose!: () => void;
  const closeSeen = new Promise<void>((r) => (sawClose = r));
  let reconnected!: (pid: number) => void;
  const newPid = new Promise<number>((r) => (reconnected = r));
  const txPromise = db.tx(async (q) => {
    pid = (await q.query<{ pid: number }>("select pg_backend_pid() as pid"))[0]!.pid;
    await terminate(pid);
    await closeSeen;
    // The pool's only connection serves another query on a new backend meanwhile.
    await newPid;
    late = await within(10_000, "an insert on the dead transaction", settled(q.query("insert into conn_loss_rows values (1)")));
    if (!late.ok) throw new Error(`insert failed: ${late.code}`);
  });
  const tx = settled(txPromise.finally(() => sawClose()));
  await closeSeen;
  const other = await within(10_000, "a query after the loss", db.query<{ pid: number }>("select pg_backend_pid() as pid"));
  reconnected(other[0]!.pid);
  const outcome = await within(10_000, "the transaction", tx);
  await waitUntil("the late insert to settle", async () => late !== undefined);
  const rows = (await admin`select count(*)::int as n from conn_loss_rows`)[0]!.n as number;
  say({
    step: "tx settled",
    ok: outcome.ok,
    code: outcome.ok ? undefined : outcome.code,
    late: late?.ok ? "ok" : late?.code,
    reconnectedPid: other[0]!.pid !== pid,
    rows,
  });
  if (outcome.ok) throw new Error("the transaction committed although its backend was terminated");
  if (late?.ok || rows !== 0) throw new Error(`the dead transaction's insert ran outside it (${rows} row(s))`);
  await poolServes(db, pid);
  await db.close();
}

/**
 * Until "stop" on stdin: three workers run short transactions back to back, a fourth a long
 * one (pg_sleep(30)) that the test waits for before it stops the server, so a transaction is
 * surely mid-statement then. Every failure is caught and counted; a line per success.
 */
async function txLoop(): Promise<void> {
  // As the scheduler runs (src/main.ts): a rejection of a lost connection that no caller is
  // left to receive is logged, not fatal (src/obs/process-guards.ts); anything else still
  // ends the process. Once in a full parallel run, a restart under this loop ended the
  // child with `connect ECONNREFUSED` and no guard to tell which kind it was, so each kind
  // is said on its own line: an uncaught exception fails the test, as it would end the
  // scheduler.
  installProcessGuards(pino({ base: null }, { write: (line: string) => say({ step: "guard", line: line.trim() }) }));
  process.on("uncaughtException", (e) => {
    say({ step: "uncaught exception", error: (e as Error).stack ?? String(e) });
    process.exit(1);
  });
  const db = openPostgres({ url: url!, maxConnections: 4, applicationName: APP });
  let stopping = false;
  const counts = { ok: 0, failed: 0 };
  const codes = new Set<string>();
  const short = async (w: number) => {
    while (!stopping) {
      const r = await settled(
        db.tx(async (q) => {
          const pid = (await q.query<{ pid: number }>("select pg_backend_pid() as pid"))[0]!.pid;
          await q.query("select pg_sleep(0.02)");
          return pid;
        }),
      );
      if (r.ok) {
        counts.ok++;
        say({ step: "ok", worker: w, n: counts.ok });
      } else {
        counts.failed++;
        codes.add(r.code);
        await Bun.sleep(50);
      }
    }
  };
  const long = async () => {
    while (!stopping) {
      const r = await settled(
        db.tx(async (q) => {
          await q.query("select pg_sleep(30)");
        }),
      );
      if (!r.ok) {
        codes.add(r.code);
        say({ step: "long tx lost", code: r.code });
        await Bun.sleep(50);
      }
    }
  };
  const stop = (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of process.stdin as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk);
      if (buf.includes("stop")) break;
    }
    stopping = true;
  })();
  say({ step: "looping" });
  const workers = [short(1), short(2), short(3), long()];
  await stop;
  // Not waiting for the workers: a transaction may be parked on a connection that postgres.js
  // reconnects only after its backoff (up to 20 s after the failed connects while the server
  // was down), which is slow but not lost; the test checked progress after each restart.
  stopping = true;
  say({ step: "stopped", ...counts, codes: [...codes].sort() });
  void workers;
}

const scenarios: Record<string, () => Promise<void>> = {
  "tx-killed-mid-statement": txKilledMidStatement,
  "tx-killed-between-statements": txKilledBetweenStatements,
  "tx-handle-after-reconnect": txHandleAfterReconnect,
  "tx-loop": txLoop,
};
// Like src/main.ts, no top-level await: while one is pending Bun only reports an uncaught
// exception (and exits 1 at the end), after it the exception ends the process at once, as
// it ended the scheduler's.
async function main(): Promise<void> {
  const run = scenario ? scenarios[scenario] : undefined;
  if (!run) throw new Error(`unknown scenario ${scenario}; one of ${Object.keys(scenarios).join(", ")}`);
  try {
    await run();
    say({ step: "done" });
  } catch (e) {
    say({ step: "failed", error: (e as Error).stack ?? String(e) });
    process.exitCode = 1;
  } finally {
    await admin.end({ timeout: 1 });
  }
  // A pool left open by a failed step must not keep the process (and the test) waiting.
  process.exit();
}

void main();
