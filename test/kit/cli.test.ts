// `scheduler jobs|schedules|dlq …`, run as real processes (bun src/main.ts) against a real
// scheduler.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";
import { tok, tokenSpec } from "../helpers/tokens.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");

describe("the resource commands over scheduler/client", () => {
  let t: TestDb;
  let rt: Runtime;
  const target = new Target((r) => (r.path === "/bad" ? new Response("no", { status: 400 }) : new Response("ok")));
  beforeAll(async () => {
    t = await freshDb("pglite");
    rt = await startScheduler(t.db, { SCHEDULER_TOKENS: tokenSpec("tok:*:jobs:read,jobs:write,admin") });
  });
  afterAll(async () => {
    await rt?.stop();
    await t?.close();
    target.stop();
  });

  const run = async (args: string[], stdin?: string) => {
    const p = Bun.spawn([process.execPath, MAIN, ...args], {
      env: { PATH: process.env.PATH ?? "", SCHEDULER_URL: rt.url!, SCHEDULER_TOKEN: tok("tok") },
      stdin: stdin === undefined ? "ignore" : new Blob([stdin]),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
    return { code, out, err };
  };

  test("--help of each resource has usage and examples; the main --help lists them", async () => {
    for (const r of ["jobs", "schedules", "dlq"]) {
      const h = await run([r, "--help"]);
      expect(h.code).toBe(0);
      expect(h.out).toContain("Examples:");
      expect(h.out).toContain(`scheduler ${r} `);
    }
    expect((await run(["--help"])).out).toContain("scheduler jobs create|get|list|cancel");
  });

  test("jobs create, get, list, cancel in tables and JSON", async () => {
    const made = await run(["jobs", "create", `--target=${target.url}/a`, '--body={"n":1}', "--delay=1h", "--key=cli-1", "--header=x-a: b", "-o", "json"]);
    expect(made.err).toBe("");
    expect(made.code).toBe(0);
    const job = JSON.parse(made.out);
    expect(job).toMatchObject({ status: "scheduled", idempotency_key: "cli-1", target: { url: `${target.url}/a`, body: { n: 1 }, headers: { "x-a": "b" } } });

    const got = await run(["jobs", "get", job.id]);
    expect(got.code).toBe(0);
    expect(got.out).toMatch(new RegExp(`^id:\\s+${job.id}$`, "m"));
    expect(got.out).toMatch(/^status:\s+scheduled$/m);

    const list = await run(["jobs", "list", "--status=scheduled"]);
    expect(list.out.split("\n")[0]).toMatch(/^ID\s+STATUS\s+DUE\s+ATTEMPTS\s+SCHEDULE\s+TARGET$/);
    expect(list.out).toContain(job.id);
    const all = JSON.parse((await run(["jobs", "list", "--all", "--limit=1", "-o", "json"])).out);
    expect(Array.isArray(all)).toBe(true);
    expect(all.map((j: { id: string }) => j.id)).toContain(job.id);

    const fromStdin = await run(["jobs", "create", "-f", "-", "-o", "json"], JSON.stringify({ target: { url: `${target.url}/b` }, delay: "1h" }));
    expect(JSON.parse(fromStdin.out).target.url).toBe(`${target.url}/b`);

    const cancelled = await run(["jobs", "cancel", job.id, "--reason=test", "-o", "json"]);
    expect(JSON.parse(cancelled.out).status).toBe("cancelled");
  });

  test("an API error: exit 1, one line with status, code, message and field; a usage error: exit 2", async () => {
    const bad = await run(["jobs", "create", "--target=ftp://x"]);
    expect(bad.code).toBe(1);
    expect(bad.err.trim()).toMatch(/^error: 400 invalid_request: .+ \(field: target\.url\)$/);
    const missing = await run(["jobs", "get", "0190a0b0-0000-7000-8000-000000000000"]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("404 not_found");
    for (const args of [
      ["jobs", "create"],
      ["jobs", "frob"],
      ["jobs", "list", "--nope"],
      ["jobs", "list", "-o", "yaml"],
      ["jobs", "get"],
    ]) {
      const r = await run(args);
      expect(r.code).toBe(2);
      expect(r.err.trim().split("\n")).toHaveLength(1);
    }
    const down = await run(["jobs", "list", "--url=http://127.0.0.1:9"]);
    expect(down.code).toBe(1);
    expect(down.err).toStartWith("error: no answer");
  });

  test("schedules create, list, pause, resume, preview", async () => {
    const made = await run([
      "schedules",
      "create",
      "--id=cli-daily",
      "--cron=0 9 * * 1-5",
      "--timezone=America/New_York",
      `--target=${target.url}/s`,
      "-o",
      "json",
    ]);
    expect(made.code).toBe(0);
    expect(JSON.parse(made.out)).toMatchObject({ id: "cli-daily", cron: "0 9 * * 1-5", timezone: "America/New_York" });
    const list = await run(["schedules", "list"]);
    expect(list.out).toMatch(/^cli-daily\s+0 9 \* \* 1-5\s+America\/New_York\s+\S+\s+no\s+/m);
    expect((await run(["schedules", "pause", "cli-daily", "--reason=freeze"])).out).toMatch(/^cli-daily\s.+\syes\s/m);
    expect(JSON.parse((await run(["schedules", "resume", "cli-daily", "-o", "json"])).out).paused).toBe(false);
    const preview = await run(["schedules", "preview", "cli-daily", "--count=3"]);
    const lines = preview.out.trim().split("\n");
    expect(lines[0]).toMatch(/^AT \(UTC\)\s+LOCAL$/);
    expect(lines).toHaveLength(4);
    for (const l of lines.slice(1)) expect(l).toMatch(/T09:00:00-0[45]:00$/);
  });

  test("dlq list and replay", async () => {
    const made = JSON.parse((await run(["jobs", "create", `--target=${target.url}/bad`, "-o", "json"])).out);
    await eventually(async () => (await run(["dlq", "list"])).out.includes(made.id), 20_000, "the job in the dead-letter queue");
    expect((await run(["dlq", "list"])).out.split("\n")[0]).toMatch(/^ID\s+REASON\s+DEAD AT\s+REPLAYS\s+ERROR$/);
    expect((await run(["dlq", "replay", made.id])).code).toBe(2);
    const replayed = await run(["dlq", "replay", made.id, "--reason=target fixed", "-o", "json"]);
    expect(replayed.code).toBe(0);
    expect(JSON.parse(replayed.out).id).toBe(made.id);
  });
});
