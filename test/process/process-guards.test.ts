// A rejection nobody handles: a lost connection's is logged and survived (postgres.js can
// orphan one when a backend dies: the chaos suite saw a dispatcher exit on it), anything
// else stays fatal. A real child process, since the point is whether it lives.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { isConnectionLoss } from "../../src/obs/process-guards.ts";

test("a lost connection's orphaned rejection is survived; any other is fatal", async () => {
  const child = Bun.spawn([process.execPath, join(import.meta.dir, "guards-child.ts")], { stdout: "pipe", stderr: "pipe" });
  const code = await child.exited;
  const out = await new Response(child.stdout).text();
  const lines = out
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg: string; level?: number; err?: { code?: string } });
  expect(lines.map((l) => l.msg)).toEqual([
    "a connection failed with no caller left to tell (unhandled rejection); continuing, the pool reconnects",
    "a connection failed with no caller left to tell (unhandled rejection); continuing, the pool reconnects",
    "still alive",
    "unhandled rejection; exiting",
  ]);
  expect(lines.slice(0, 2).map((l) => l.err?.code)).toEqual(["ECONNRESET", "57P01"]);
  expect(code).toBe(1);
});

test("what counts as a lost connection", () => {
  for (const code of ["ECONNRESET", "EPIPE", "CONNECTION_CLOSED", "08006", "08P01", "57P01"]) expect(isConnectionLoss({ code })).toBe(true);
  for (const e of [new Error("x"), { code: "40P01" }, { code: "23505" }, null, undefined, "ECONNRESET", { code: 104 }]) expect(isConnectionLoss(e)).toBe(false);
});
