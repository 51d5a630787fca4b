import { readdirSync, readFileSync } from "node:fs";
import { statCpuSeconds } from "./scheduler-process.ts";

/**
 * A Bun process's CPU time (user + system, seconds) by what its threads do, from
 * /proc/PID/task/TID: the JavaScript thread (the process's first thread: every line of JS,
 * postgres.js's socket writes), Bun's HTTP client thread (every fetch's connection work), the
 * JS engine's JIT compiler threads, and the rest (garbage collector helpers, mimalloc's
 * scavenger, thread pools). A process that is new when a burst starts compiles its hot code
 * during it, on the other core: the JIT's share is part of what a burst costs.
 */
export interface ThreadCpu {
  js: number;
  http: number;
  jit: number;
  other: number;
}

/** Which of ThreadCpu's parts a thread belongs to, by its name (/proc/…/comm) as Bun and JavaScriptCore set it. */
export function threadKind(tid: number, pid: number, name: string): keyof ThreadCpu {
  if (tid === pid) return "js";
  if (name.startsWith("HTTP Client")) return "http";
  if (name.startsWith("JITWorker")) return "jit";
  return "other";
}

/** Undefined without /proc or once the process is gone. Threads that ended are not counted. */
export function threadCpuSeconds(pid: number): ThreadCpu | undefined {
  const out: ThreadCpu = { js: 0, http: 0, jit: 0, other: 0 };
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const t of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8");
      // The name is between the first "(" and the last ")": it may hold spaces ("HTTP Client").
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      out[threadKind(Number(t), pid, name)] += statCpuSeconds(stat);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** From two readings of one process: µs of CPU per job in each part. */
export function perJob(before: ThreadCpu, after: ThreadCpu, jobs: number): ThreadCpu {
  const us = (k: keyof ThreadCpu) => ((after[k] - before[k]) / jobs) * 1e6;
  return { js: us("js"), http: us("http"), jit: us("jit"), other: us("other") };
}
