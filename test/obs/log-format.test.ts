// Log lines as people and machines get them: one readable line per event when stdout is a
// terminal (a real pseudo-terminal from util-linux `script`), one JSON line per event when it
// is a pipe or a file, and LOG_FORMAT to choose either way.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { freePort } from "../helpers/process.ts";
import { eventually, Target } from "../helpers/target.ts";

const ROOT = join(import.meta.dir, "..", "..");
const BUN = process.execPath;
const CHILD = join(import.meta.dir, "log-child.ts");
/** A readable line: time, level, message (colour codes taken out first). */
const READABLE = /^\[\d\d:\d\d:\d\d\.\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL): \S/;
const ANSI = /\x1b\[[0-9;]*m/g;

const sh = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Lines of output without colour codes, the terminal's carriage returns and its echo of a
 * typed Ctrl-C (^C), empty ones dropped.
 */
function lines(out: string): string[] {
  return out
    .replace(ANSI, "")
    .split("\n")
    .map((l) => l.replace(/\r$/, "").replace(/^\^C/, ""))
    .filter((l) => l.trim() !== "");
}

/** Runs argv under a pseudo-terminal (`script`), collecting what the terminal showed. */
function onTerminal(argv: string[], env: Record<string, string>) {
  const proc = Bun.spawn(["script", "-qfec", `exec ${argv.map(sh).join(" ")}`, "/dev/null"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", SHELL: "/bin/sh", TERM: "xterm-256color", ...env },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  const reading = (async () => {
    for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
  })();
  return {
    proc,
    out: () => out,
    done: async () => {
      await proc.exited;
      await reading;
      return out;
    },
  };
}

async function runPiped(argv: string[], env: Record<string, string> = {}) {
  const proc = Bun.spawn(argv, { cwd: ROOT, env: { PATH: process.env.PATH ?? "", ...env }, stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  return out;
}

describe("log lines (the logger alone)", () => {
  test("on a terminal: one readable, coloured line per event, the job id first, an error on its own one line", async () => {
    const t = onTerminal([BUN, CHILD, "auto"], {});
    const raw = await t.done();
    expect(await t.proc.exited).toBe(0);
    // Colour for the level, as a terminal shows it.
    expect(raw).toContain("\x1b[32mINFO");
    const ls = lines(raw);
    expect(ls).toHaveLength(3);
    for (const l of ls) expect(l).toMatch(READABLE);
    expect(ls[0]).toContain("INFO: job 0193e0a4-0000-7000-8000-000000000001: delivered");
    expect(ls[0]).toContain('"outcome":"success"');
    // Region and mode are the same on every line of a process: left out.
    expect(ls[0]).not.toContain("region");
    expect(ls[1]).toContain("ERROR: the database is unreachable");
    expect(ls[1]).toContain("Error [ECONNREFUSED]: connect ECONNREFUSED 127.0.0.1:5432 while opening the pool");
    expect(ls[2]).toMatch(/WARN: done$/);
  });

  test("through a pipe: JSON lines, exactly as before (level label, ISO time, base fields, err with its stack)", async () => {
    const ls = lines(await runPiped([BUN, CHILD, "auto"]));
    expect(ls).toHaveLength(3);
    const [delivered, failed, done] = ls.map((l) => JSON.parse(l));
    expect(delivered).toMatchObject({
      level: "info",
      region: "local",
      mode: "all",
      job_id: "0193e0a4-0000-7000-8000-000000000001",
      attempt: 1,
      outcome: "success",
      msg: "delivered",
    });
    expect(Object.keys(delivered).slice(0, 4)).toEqual(["level", "time", "region", "mode"]);
    expect(new Date(delivered.time).toISOString()).toBe(delivered.time);
    expect(failed.level).toBe("error");
    expect(failed.err).toMatchObject({ type: "Error", code: "ECONNREFUSED" });
    expect(failed.err.stack).toContain("log-child.ts");
    expect(done).toMatchObject({ level: "warn", msg: "done" });
  });

  test("LOG_FORMAT's choices win over the terminal check: json on a terminal, pretty through a pipe", async () => {
    const t = onTerminal([BUN, CHILD, "json"], {});
    const onTty = lines(await t.done());
    expect(onTty).toHaveLength(3);
    for (const l of onTty) expect(() => JSON.parse(l)).not.toThrow();
    const piped = lines(await runPiped([BUN, CHILD, "pretty"]));
    expect(piped).toHaveLength(3);
    for (const l of piped) expect(l).toMatch(READABLE);
  });
});

describe("log lines (the scheduler process)", () => {
  let tdb: TestDb;
  let target: Target;
  beforeAll(async () => {
    tdb = await freshDb("postgres");
    target = new Target();
  });
  afterAll(async () => {
    target?.stop();
    await tdb?.close();
  });

  const env = () => ({
    DATABASE_URL: tdb.url!,
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
    SCHEDULER_ALLOW_PRIVATE_TARGETS: "1",
    SCHEDULER_POLL_INTERVAL: "200ms",
    SCHEDULER_CLOCK_SKEW: "0",
  });

  async function deliverOne(url: string, path: string): Promise<string> {
    const res = await fetch(`${url}/v1/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ target: { url: `${target.url}${path}` } }),
    });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    await eventually(() => target.callsTo(path).length === 1, 15_000, `the call to ${path}`);
    return id;
  }

  test("scheduler on a terminal: readable lines from start to stop, a delivery names its job", async () => {
    const port = await freePort();
    const t = onTerminal([BUN, join(ROOT, "src/main.ts")], { ...env(), PORT: String(port) });
    try {
      await eventually(() => t.out().includes("scheduler started"), 30_000, "the scheduler to start");
      const id = await deliverOne(`http://127.0.0.1:${port}`, "/tty");
      await eventually(() => t.out().includes(`job ${id}: delivered`), 15_000, "the delivered line");
    } finally {
      // Ctrl-C typed on the terminal: SIGINT to the scheduler, which stops gracefully.
      t.proc.stdin.write("\x03");
      t.proc.stdin.flush();
    }
    const ls = lines(await t.done());
    expect(await t.proc.exited).toBe(0);
    expect(ls.find((l) => l.includes("scheduler started"))).toContain(`http://127.0.0.1:${port}`);
    expect(ls.some((l) => /INFO: stopped$/.test(l))).toBe(true);
    const notReadable = ls.filter((l) => !READABLE.test(l));
    expect(notReadable).toEqual([]);
  }, 60_000);

  test("scheduler through a pipe: every line of stdout is JSON, a delivery carries its job_id", async () => {
    const port = await freePort();
    const proc = Bun.spawn([BUN, join(ROOT, "src/main.ts")], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", ...env(), PORT: String(port) },
      stdout: "pipe",
      stderr: "pipe",
    });
    let out = "";
    const reading = (async () => {
      for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
    })();
    let id = "";
    try {
      await eventually(() => out.includes("scheduler started"), 30_000, "the scheduler to start");
      id = await deliverOne(`http://127.0.0.1:${port}`, "/pipe");
      await eventually(() => out.includes(`"job_id":"${id}"`) && out.includes('"msg":"delivered"'), 15_000, "the delivered line");
    } finally {
      proc.kill("SIGTERM");
    }
    await proc.exited;
    await reading;
    const ls = lines(out).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(ls.length).toBeGreaterThan(3);
    expect(ls.find((l) => l.msg === "delivered")).toMatchObject({ job_id: id, outcome: "success" });
    const shape = (l: Record<string, unknown>) => [typeof l.level, typeof l.time, l.region, l.mode, typeof l.msg].join(" ");
    expect(new Set(ls.map(shape))).toEqual(new Set(["string string local all string"]));
    expect(ls.at(-1)!.msg).toBe("stopped");
  }, 60_000);
});
