/**
 * A CPU profile of one Bun thread from `perf record`, with the JavaScript functions named.
 *
 * Bun's own sampler (`--cpu-prof`) takes the JS thread's stack on a wall clock: on a busy
 * 2-core box the thread is often descheduled inside a socket write, and those samples go to
 * `writeBuffered` and `fetch` (bench/README.md, parts 8 and 15). `perf` samples on-CPU time
 * only, but sees JIT-compiled code as bare addresses; JavaScriptCore writes what it compiled,
 * and where, to a JITDump file when asked, and this script names the addresses from it.
 *
 *   SCHEDULER_BENCH_ENV="BUN_JSC_useJITDump=1 BUN_JSC_jitDumpDirectory=/tmp/jd" \
 *     perf record -k 1 -e cpu-clock -F 999 -a -g -o /tmp/perf.data -- npm run bench:peers -- --systems scheduler --burst 40000 --herd 1000 --lag 100
 *   bun bench/js-thread-profile.ts /tmp/perf.data /tmp/jd/jit-<n>-<pid>.dump [tid]
 *
 * One dump per process started; its name ends in the process's pid, which is also the JS
 * thread's id and the default tid. Prints self time by function, inclusive time, and the share of the samples under
 * a few entry points (postgres.js's socket reads, promise jobs, the calls).
 */
import { readFileSync } from "node:fs";

interface Code {
  start: number;
  end: number;
  name: string;
  /** When it was compiled (ns, CLOCK_MONOTONIC: perf's clock with -k 1). */
  at: number;
}

/** JIT_CODE_LOAD records of a JITDump file (the perf jitdump format, version 1). */
export function jitCode(path: string): Code[] {
  const b = readFileSync(path);
  if (b.readUInt32LE(0) !== 0x4a695444) throw new Error(`${path} is not a JITDump file`);
  const code: Code[] = [];
  for (let off = b.readUInt32LE(8); off + 16 <= b.length; ) {
    const id = b.readUInt32LE(off);
    const size = b.readUInt32LE(off + 4);
    const at = Number(b.readBigUInt64LE(off + 8));
    if (size === 0) break;
    if (id === 0) {
      const addr = Number(b.readBigUInt64LE(off + 16 + 16));
      const len = Number(b.readBigUInt64LE(off + 16 + 24));
      const nameAt = off + 16 + 40;
      const name = b.toString("utf8", nameAt, b.indexOf(0, nameAt));
      code.push({ start: addr, end: addr + len, name, at });
    }
    off += size;
  }
  return code.sort((x, y) => x.start - y.start);
}

/**
 * Names an address at an instant (ns): the code compiled there last before it. The engine
 * frees code it throws away and compiles new code into the same memory, so one address can
 * hold several functions over a run.
 */
export function resolver(code: Code[]): (ip: number, at: number) => string | undefined {
  const longest = code.reduce((m, c) => Math.max(m, c.end - c.start), 0);
  return (ip, at) => {
    let lo = 0;
    let hi = code.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (code[mid].start <= ip) lo = mid + 1;
      else hi = mid - 1;
    }
    let best: Code | undefined;
    for (let i = hi; i >= 0 && code[i].start > ip - longest; i--) {
      const c = code[i];
      if (ip < c.end && c.at <= at && (!best || c.at > best.at)) best = c;
    }
    return best?.name;
  };
}

/** "JSC-FTL: deliver#Du9pwZ" → "deliver"; tiers and hashes apart, one function is one name. */
const jsName = (n: string) => n.replace(/^JSC-\w+: /, "").split("#")[0];
/** Code of a JS function (its Baseline, DFG or FTL tier), not a thunk, inline cache or OSR exit stub. */
const isFunction = (n: string) => /^JSC-(Baseline|DFG|FTL): ./.test(n) && jsName(n) !== "";

function main(): void {
  const [perfData, dump, tidArg] = process.argv.slice(2);
  if (!perfData || !dump) {
    console.error("usage: bun bench/js-thread-profile.ts PERF_DATA JITDUMP [TID]");
    process.exit(2);
  }
  const tid = tidArg ?? /jit-\d+-(\d+)\.dump$/.exec(dump)?.[1];
  if (!tid) throw new Error("no thread id: give it, or a dump named jit-<n>-<pid>.dump");
  const name = resolver(jitCode(dump));
  const out = Bun.spawnSync(["perf", "script", "-i", perfData, "--tid", tid, "-F", "time,ip,sym,dso", "--ns"], { stderr: "ignore" });
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const groups = new Map<string, number>();
  const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  let samples = 0;
  for (const block of out.stdout.toString().split("\n\n")) {
    const frames: string[] = [];
    const time = /^\s*(\d+)\.(\d{9}):/m.exec(block);
    const at = time ? Number(time[1]) * 1e9 + Number(time[2]) : Number.POSITIVE_INFINITY;
    for (const line of block.split("\n")) {
      const m = /^\s*([0-9a-f]+)\s+(.*?)\s*\((.*)\)\s*$/.exec(line);
      if (!m) continue;
      const sym = m[2];
      if (!sym.startsWith("[unknown]")) frames.push(m[3].includes("kernel") ? `kernel: ${sym}` : sym);
      else frames.push(name(Number.parseInt(m[1], 16), at) ?? `native: ${m[3].split("/").pop()}`);
    }
    if (frames.length === 0) continue;
    samples++;
    bump(self, isFunction(frames[0]) ? jsName(frames[0]) : frames[0].startsWith("JSC-") ? "JIT stubs (thunks, inline caches)" : frames[0]);
    const js = frames.filter(isFunction).map(jsName);
    for (const f of new Set(js)) bump(inclusive, f);
    const outer = js.at(-1);
    const group =
      js.includes("pushDataToSocket") || js.includes("readableAddChunkPushByteMode")
        ? "postgres.js reading its socket (rows decoded)"
        : outer === "processTicksAndRejections"
          ? "promise jobs (code after an await)"
          : outer === "deliver" || outer === "callAttempt"
            ? "a call's own path (fetch's answer, deliver, callAttempt)"
            : outer === undefined
              ? "no JS on the stack (Bun's native code, the kernel)"
              : `other entry points (${outer}, …)`;
    bump(groups, group.startsWith("other") ? "other entry points" : group);
  }
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `${((100 * v) / samples).toFixed(1).padStart(6)} %  ${k.slice(0, 120)}`);
  console.log(`${samples} samples of thread ${tid}\n\nby entry point:\n${top(groups, 10).join("\n")}`);
  console.log(`\nself:\n${top(self, 30).join("\n")}\n\ninclusive (JS functions):\n${top(inclusive, 40).join("\n")}`);
}

if (import.meta.main) main();
