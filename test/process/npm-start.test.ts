// `npm start` under a supervisor, or a `kill` of a backgrounded `npm start`, sends SIGTERM to
// npm, which passes it on to its child: the script's shell. The script ran bun as the shell's
// child, so the shell died and bun ran on, an orphan still serving the port and holding
// ./data's lock. The script now execs bun: the signal reaches the scheduler, which stops
// gracefully.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../helpers/process.ts";
import { eventually } from "../helpers/target.ts";

const ROOT = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "sched-npm-start-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("SIGTERM to `npm start` reaches the scheduler: it stops gracefully and leaves no process behind", async () => {
  const port = await freePort();
  const npm = Bun.spawn(["npm", "start", "--silent"], {
    cwd: ROOT,
    // The embedded default, as a newcomer runs it; nothing of the test's own servers.
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", SCHEDULER_DATA_DIR: join(dir, "data"), PORT: String(port), LOG_LEVEL: "info" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  const reading = (async () => {
    for await (const chunk of npm.stdout) out += new TextDecoder().decode(chunk);
  })();
  let pid = 0;
  try {
    // The scheduler's pid is in its owner id (host/pid/random).
    await eventually(() => /"msg":"scheduler started"/.test(out), 30_000, "the scheduler started under npm start");
    const started = out.split("\n").find((l) => l.includes('"msg":"scheduler started"'))!;
    pid = Number((JSON.parse(started) as { owner: string }).owner.split("/")[1]);
    expect(pid).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    npm.kill("SIGTERM");
    await npm.exited;
    await eventually(() => !alive(pid), 15_000, "the scheduler's process gone after npm's SIGTERM");
    await reading;
    expect(out).toContain('"msg":"stopped"');
    expect(
      await fetch(`http://127.0.0.1:${port}/readyz`).then(
        () => "answered",
        () => "refused",
      ),
    ).toBe("refused");
  } finally {
    if (pid && alive(pid)) process.kill(pid, "SIGKILL");
    npm.kill("SIGKILL");
  }
}, 60_000);
