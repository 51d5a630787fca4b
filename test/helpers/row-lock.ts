import { openPostgres } from "../../src/store/postgres-driver.ts";

/**
 * A connection of the test's own (PostgreSQL at `url`), holding the row locks `lockSql`
 * (a SELECT … FOR UPDATE) takes until release(): a transaction of another client, beside the
 * scheduler's. release() ends it and closes the connection; calling it again is harmless.
 */
export async function holdRowLock(url: string, lockSql: string, params: unknown[]): Promise<{ release: () => Promise<void> }> {
  const conn = openPostgres({ url, maxConnections: 1, applicationName: "test-lock-holder" });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const done = conn.tx(async (q) => {
    await q.query(lockSql, params);
    locked();
    await released;
  });
  await Promise.race([isLocked, done]);
  let closing: Promise<void> | undefined;
  return {
    release: () =>
      (closing ??= (async () => {
        release();
        await done;
        await conn.close();
      })()),
  };
}
