// The compiled single binary, as a user runs it: built by scripts/build.ts, started from a
// directory that is not the repo (so nothing resolves from node_modules or src/), with no
// DATABASE_URL (embedded PGlite in ./data of that directory).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import pkg from "../../package.json" with { type: "json" };

const repo = resolve(import.meta.dir, "../..");
let root = "";
let bin = "";
let cwd = "";
let port = 0;
const procs = new Set<Subprocess>();
let runs = 0;

/** A port that was free a moment ago: bind port 0, read what the kernel gave, let it go. */
function freePort(): number {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const p = s.port;
  s.stop(true);
  if (!p) throw new Error("could not get a free port");
  return p;
}

/** Only what the binary needs: in particular no DATABASE_URL from `npm test`'s services. */
function env(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, LOG_LEVEL: "info", ...extra };
}

function logs(n: number): string {
  const read = (f: string) => (existsSync(f) ? readFileSync(f, "utf8") : "");
  return `--- stdout (run ${n}) ---\n${read(join(root, `run${n}.out`))}--- stderr (run ${n}) ---\n${read(join(root, `run${n}.err`))}`;
}

function start(): { proc: Subprocess; run: number } {
  const run = ++runs;
  const proc = Bun.spawn([bin], {
    cwd,
    env: env({ PORT: String(port), HOST: "127.0.0.1" }),
    stdin: "ignore",
    stdout: Bun.file(join(root, `run${run}.out`)),
    stderr: Bun.file(join(root, `run${run}.err`)),
  });
  procs.add(proc);
  proc.exited.then(() => procs.delete(proc));
  return { proc, run };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const base = () => `http://127.0.0.1:${port}`;

async function waitReady(proc: Subprocess, run: number, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      throw new Error(`scheduler exited (code ${proc.exitCode}, signal ${proc.signalCode}) before /readyz was 200\n${logs(run)}`);
    }
    try {
      const res = await fetch(`${base()}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (res.status === 200) return;
      last = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`/readyz not 200 within ${ms} ms (last: ${last})\n${logs(run)}`);
}

/** SIGTERM, then the exit code; "timeout" (after a SIGKILL) if it did not exit within 30 s. */
async function stop(proc: Subprocess): Promise<number | null | "timeout"> {
  proc.kill("SIGTERM");
  const result = await Promise.race([proc.exited, sleep(30_000).then(() => "timeout" as const)]);
  if (result === "timeout") proc.kill("SIGKILL");
  return result;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "scheduler-binary-"));
  bin = join(root, "bin", "scheduler");
  cwd = join(root, "work");
  await mkdir(cwd, { recursive: true });
  // Built into the temp dir so that concurrent runs do not overwrite each other's dist/.
  const build = Bun.spawn([process.execPath, "scripts/build.ts", `--outfile=${bin}`], {
    cwd: repo,
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => build.kill("SIGKILL"), 110_000);
  const [code, out, err] = await Promise.all([build.exited, new Response(build.stdout).text(), new Response(build.stderr).text()]);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`bun scripts/build.ts exited with ${code}\n${out}${err}`);
  if (!existsSync(bin)) throw new Error(`build succeeded but ${bin} is missing\n${out}${err}`);
  port = freePort();
}, 120_000);

afterAll(async () => {
  for (const proc of procs) {
    proc.kill("SIGKILL");
    await Promise.race([proc.exited, sleep(5_000)]);
  }
  if (root) await rm(root, { recursive: true, force: true });
});

describe("compiled binary", () => {
  test("--version prints the package.json version", () => {
    const r = Bun.spawnSync([bin, "--version"], { cwd, env: env() });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString().trim()).toBe(pkg.version);
  });

  test("--help mentions --mode", () => {
    const r = Bun.spawnSync([bin, "--help"], { cwd, env: env() });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString()).toContain("--mode");
  });

  let jobId = "";

  test("serves with embedded PGlite in ./data, creates a job, stops cleanly on SIGTERM", async () => {
    const { proc, run } = start();
    let stopped: number | null | "timeout" = "timeout";
    try {
      await waitReady(proc, run);
      expect(existsSync(join(cwd, "data"))).toBe(true);

      const res = await fetch(`${base()}/v1/jobs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ target: { url: "https://example.com/hook" }, delay: "1h" }),
      });
      const created = (await res.json()) as { id?: string; status?: string };
      expect(res.status).toBe(201);
      expect(typeof created.id).toBe("string");
      expect(created.status).toBe("scheduled");
      jobId = created.id!;

      const got = await fetch(`${base()}/v1/jobs/${jobId}`);
      expect(got.status).toBe(200);
      const job = (await got.json()) as { id?: string; status?: string };
      expect(job.id).toBe(jobId);
      expect(job.status).toBe("scheduled");

      // The dashboard's files are inside the binary (imported as text), not read from src/.
      const page = await fetch(`${base()}/ui`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('src="/ui/app.js"');
      const script = await fetch(`${base()}/ui/app.js`);
      expect(script.headers.get("content-type")).toContain("text/javascript");
      expect(await script.text()).toContain("/v1/stats");
    } finally {
      // Stopped even when a step above failed; that failure is the one reported.
      stopped = await stop(proc);
    }
    if (stopped !== 0) throw new Error(`expected exit code 0 within 30 s of SIGTERM, got ${stopped}\n${logs(run)}`);
  }, 200_000);

  test("a restart on the same data dir still has the job", async () => {
    expect(jobId).not.toBe("");
    const { proc, run } = start();
    let stopped: number | null | "timeout" = "timeout";
    try {
      await waitReady(proc, run);
      const got = await fetch(`${base()}/v1/jobs/${jobId}`);
      expect(got.status).toBe(200);
      const job = (await got.json()) as { id?: string; status?: string };
      expect(job.id).toBe(jobId);
      expect(job.status).toBe("scheduled");

      // The API reference is built at run time from the schemas (@valibot/to-json-schema).
      const spec = await fetch(`${base()}/openapi.json`);
      expect(spec.status).toBe(200);
      const document = (await spec.json()) as { openapi?: string; paths?: Record<string, unknown> };
      expect(document.openapi).toStartWith("3.1");
      expect(Object.keys(document.paths ?? {})).toContain("/v1/jobs/{id}");
      const page = await fetch(`${base()}/docs`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<code>/v1/schedules/{id}</code>");
    } finally {
      stopped = await stop(proc);
    }
    if (stopped !== 0) throw new Error(`expected exit code 0 within 30 s of SIGTERM, got ${stopped}\n${logs(run)}`);
  }, 200_000);

  test("on a terminal it logs one readable line per event (pino-pretty inside the binary), and stops on Ctrl-C", async () => {
    // util-linux script gives the binary a pseudo-terminal as stdout; its output is what the
    // terminal showed.
    const quoted = `'${bin.replaceAll("'", `'\\''`)}'`;
    const proc = Bun.spawn(["script", "-qfec", `exec ${quoted}`, "/dev/null"], {
      cwd,
      env: env({ PORT: String(port), HOST: "127.0.0.1", SHELL: "/bin/sh", TERM: "xterm" }),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    procs.add(proc);
    let out = "";
    const reading = (async () => {
      for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
    })();
    const deadline = Date.now() + 30_000;
    while (!out.includes("scheduler started") && Date.now() < deadline && proc.exitCode === null) await sleep(100);
    proc.stdin.write("\x03");
    proc.stdin.flush();
    const code = await Promise.race([proc.exited, sleep(30_000).then(() => "timeout" as const)]);
    await reading;
    const lines = out
      .replace(/\x1b\[[0-9;]*m/g, "")
      .split("\n")
      .map((l) => l.replace(/\r$/, "").replace(/^\^C/, ""))
      .filter((l) => l.trim());
    if (code !== 0) throw new Error(`exit ${code}; the terminal showed:\n${out}`);
    expect(lines.find((l) => l.includes("scheduler started"))).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: scheduler started \{"url":"http:\/\/127\.0\.0\.1:\d+"/,
    );
    expect(lines.filter((l) => !/^\[\d\d:\d\d:\d\d\.\d{3}\] [A-Z]+: /.test(l))).toEqual([]);
    expect(lines.at(-1)).toMatch(/INFO: stopped$/);
  }, 70_000);
});
