// The README's receiver (examples/receiver.ts, shown verbatim in "Exactly-once effects"),
// run as it is, as a real process, against a real scheduler.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import postgres from "postgres";
import { Webhook } from "standardwebhooks";
import type { Runtime } from "../../src/runtime.ts";
import { createDatabase, dropDatabase, freshDb, type TestDb } from "../helpers/db.ts";
import { freePort } from "../helpers/process.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

const ROOT = join(import.meta.dir, "..", "..");
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD = `whsec_${Buffer.from("the-previous-key-being-rotated!!").toString("base64")}`;

describe("the README's receiver, run as it is (postgres)", () => {
  let t: TestDb;
  let rt: Runtime;
  let receiverDb: string;
  let rsql: postgres.Sql;
  let proc: ReturnType<typeof Bun.spawn>;
  let url: string;

  beforeAll(async () => {
    t = await freshDb("postgres");
    rt = await startScheduler(t.db, { SCHEDULER_SIGNING_SECRET: SECRET });
    receiverDb = await createDatabase();
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    proc = Bun.spawn([process.execPath, join(ROOT, "examples/receiver.ts")], {
      cwd: ROOT,
      stdout: "inherit",
      stderr: "inherit",
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: receiverDb, WEBHOOK_SECRET: `${OLD} ${SECRET}`, PORT: String(port) },
    });
    await eventually(
      () =>
        fetch(url).then(
          (r) => r.status === 400,
          () => false,
        ),
      20_000,
      "the example receiver to serve",
    );
    rsql = postgres(receiverDb, { max: 1, onnotice: () => {} });
  }, 60_000);
  afterAll(async () => {
    proc?.kill("SIGKILL");
    await proc?.exited;
    await rsql?.end();
    await rt?.stop();
    await t?.close();
    if (receiverDb) await dropDatabase(receiverDb);
  });

  test("the README shows examples/receiver.ts verbatim", async () => {
    const readme = await Bun.file(join(ROOT, "README.md")).text();
    const example = await Bun.file(join(ROOT, "examples/receiver.ts")).text();
    expect(readme).toContain(`\`\`\`ts\n${example}\`\`\``);
    // The client example too (tsc type-checks examples/ against the generated types).
    expect(readme).toContain(`\`\`\`ts\n${await Bun.file(join(ROOT, "examples/client.ts")).text()}\`\`\``);
    expect(example.split("\n").filter((l) => l.trim() && !l.trim().startsWith("//")).length).toBeLessThanOrEqual(22);
  });

  test("jobs from the scheduler are charged once each; a repeated call gets the first answer; a stale token 409; verify answers", async () => {
    const ids: string[] = [];
    for (const amount of [5, 7, 11]) {
      const r = await api(rt, "POST", "/v1/jobs", { target: { url: `${url}/hook`, body: { amount } }, verify: { url: `${url}/hook` } });
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    for (const id of ids) {
      await eventually(async () => (await api(rt, "GET", `/v1/jobs/${id}`)).body.status === "succeeded", 20_000, `job ${id}`);
    }
    const charges = await rsql`SELECT webhook_id, amount FROM charges ORDER BY amount`;
    expect(charges.map((c) => [c.webhook_id, c.amount])).toEqual([
      [ids[0], 5],
      [ids[1], 7],
      [ids[2], 11],
    ]);

    // A repeat of the first job's call (as a retry would send it, signed with the old key).
    const body = JSON.stringify({ amount: 5 });
    const call = (token: string) => {
      const at = new Date();
      return fetch(`${url}/hook`, {
        method: "POST",
        body,
        headers: {
          "webhook-id": ids[0],
          "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
          "webhook-signature": new Webhook(OLD).sign(ids[0], at, body),
          "scheduler-fencing-token": token,
        },
      });
    };
    const job = (await api(rt, "GET", `/v1/jobs/${ids[0]}`)).body;
    const again = await call(String(job.epoch));
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ charged: 5 });
    expect((await call(String(job.epoch - 1))).status).toBe(409);
    expect((await rsql`SELECT count(*)::int AS n FROM charges`)[0].n).toBe(3);

    const ask = (id: string) => {
      const at = new Date();
      return fetch(`${url}/hook`, {
        headers: { "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": new Webhook(SECRET).sign(id, at, "") },
      });
    };
    expect(await (await ask(ids[1])).json()).toMatchObject({ processed: true });
    expect((await ask(crypto.randomUUID())).status).toBe(404);
  }, 60_000);
});
