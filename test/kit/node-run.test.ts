import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Runtime } from "../../src/runtime.ts";
import { createDatabase, dropDatabase, freshDb, type TestDb } from "../helpers/db.ts";
import { startScheduler } from "../helpers/scheduler.ts";

const root = resolve(import.meta.dir, "../..");

// Runs on Node (the version installed, >= 20), importing the package by its own name, so
// the "exports" map and the built files (npm run build:kit) are what is tested.
const SCRIPT = `
import { createClient, SchedulerApiError, collect } from "scheduler/client";
import { checkWebhook, migrateReceiver, once, processedStatus } from "scheduler/receiver";
import { createHmac } from "node:crypto";
import postgres from "postgres";

const out = { node: process.version };
const c = createClient({ baseUrl: process.env.SCHEDULER_URL });
const job = await c.jobs.create({ target: { url: "http://127.0.0.1:9/x" }, delay: "1h" });
out.created = job.status;
out.got = (await c.jobs.get(job.id)).id === job.id;
out.listed = (await collect(c.jobs.iterate({ limit: 1 }))).length;
try { await c.jobs.create({ target: { url: "nope" } }); } catch (e) { out.error = { api: e instanceof SchedulerApiError, status: e.status, code: e.code, path: e.path }; }

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ts = String(Math.floor(Date.now() / 1000));
const body = '{"a":1}';
const sig = "v1," + createHmac("sha256", Buffer.from(secret.slice(6), "base64")).update("msg_1." + ts + "." + body).digest("base64");
out.verified = (await checkWebhook({ secrets: secret }, { headers: { "webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": sig }, body })).json().a;

const sql = postgres(process.env.RECEIVER_DATABASE_URL, { onnotice: () => {} });
await migrateReceiver(sql);
let runs = 0;
const results = await Promise.all([1, 2, 3].map(() => once(sql, "msg_1", async (tx) => { runs++; await tx\`SELECT 1\`; return { n: 7 }; })));
out.once = { runs, results, status: (await processedStatus(sql, "msg_1")).processed };
await sql.end();
console.log(JSON.stringify(out));
`;

describe("scheduler/client and scheduler/receiver on Node", () => {
  let t: TestDb;
  let rt: Runtime;
  let receiverDb: string;
  beforeAll(async () => {
    t = await freshDb("pglite");
    rt = await startScheduler(t.db);
    receiverDb = await createDatabase();
    const build = Bun.spawnSync([process.execPath, "scripts/build-kit.ts"], { cwd: root, stdout: "pipe", stderr: "pipe" });
    if (build.exitCode !== 0) throw new Error(`build:kit failed: ${build.stderr.toString()}`);
  }, 60_000);
  afterAll(async () => {
    await rt?.stop();
    await t?.close();
    if (receiverDb) await dropDatabase(receiverDb);
  });

  test("a real Node run: typed calls, a typed error, pagination, signature check, once in PostgreSQL", async () => {
    const dir = join(root, "dist/node-check");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "run.mjs"), SCRIPT);
    const p = Bun.spawn(["node", join(dir, "run.mjs")], {
      cwd: root,
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, SCHEDULER_URL: rt.url!, RECEIVER_DATABASE_URL: receiverDb },
    });
    const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const out = JSON.parse(stdout);
    expect(Number(/^v(\d+)/.exec(out.node)![1])).toBeGreaterThanOrEqual(20);
    expect(out).toMatchObject({
      created: "scheduled",
      got: true,
      listed: 1,
      error: { api: true, status: 400, code: "invalid_request", path: "target.url" },
      verified: 1,
      once: { runs: 1, results: [{ n: 7 }, { n: 7 }, { n: 7 }], status: true },
    });
  }, 60_000);
});
