import { DrillError } from "./errors.ts";

export interface RunResult {
  code: number;
  output: string;
}

/**
 * Runs a short-lived program to completion with stdout and stderr captured together.
 * cwd "/" by default: run as the postgres user, programs warn about a cwd they cannot read.
 */
export async function run(cmd: string[], opts: { cwd?: string; env?: Record<string, string | undefined>; timeoutMs?: number } = {}): Promise<RunResult> {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd ?? "/",
    env: opts.env ?? process.env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = opts.timeoutMs ? setTimeout(() => proc.kill("SIGKILL"), opts.timeoutMs) : undefined;
  try {
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, output: (out + err).trim() };
  } finally {
    if (timer) clearTimeout(timer);
  }
}

/** run(), and a DrillError naming the program and the end of its output unless it exits 0. */
export async function runOk(what: string, cmd: string[], opts: Parameters<typeof run>[1] = {}): Promise<string> {
  const r = await run(cmd, opts);
  if (r.code !== 0) throw new DrillError(`${what} failed (exit ${r.code}): ${lastLines(r.output, 5) || "no output"}`);
  return r.output;
}

/** The last n non-empty lines, joined with " | " so an error stays on one line. */
export function lastLines(text: string, n: number): string {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-n)
    .join(" | ");
}
