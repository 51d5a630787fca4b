import type { Subprocess } from "bun";

/**
 * A loopback webhook target in its own Bun process (answers 200 "ok" to every call), so that
 * the measuring process's CPU is its own loop's alone. `url` is its /hook address.
 */
export async function startTargetProcess(who: string): Promise<{ url: string; proc: Subprocess; stop: () => void }> {
  const proc = Bun.spawn(
    [
      process.execPath,
      "-e",
      `const s = Bun.serve({ port: 0, hostname: "127.0.0.1", async fetch(r) { await r.arrayBuffer(); return new Response("ok"); } }); console.log(s.port);`,
    ],
    { stdout: "pipe" },
  );
  const first = await proc.stdout.getReader().read();
  const port = Number(new TextDecoder().decode(first.value).trim());
  if (!(port > 0)) throw new Error(`${who}: the target process did not start`);
  return { url: `http://127.0.0.1:${port}/hook`, proc, stop: () => proc.kill() };
}
