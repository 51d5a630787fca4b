import { readdirSync, readFileSync } from "node:fs";
import { CLK_TCK, statCpuSeconds } from "./scheduler-process.ts";

/**
 * The CPU time (user + system, seconds) of a PostgreSQL server on this machine, by what its
 * processes do: the client backends (every statement a system sends), the WAL writer, the
 * autovacuum launcher and workers, the checkpointer and background writer, the rest (the
 * postmaster, the logical replication launcher, …), and the children that exited meanwhile
 * (the postmaster's reaped children's time, /proc/PID/stat cutime + cstime). Beside the
 * process's own CPU this tells the machine's CPU a job apart: how much of it is the
 * database's, and which part of the database.
 */
export interface PostgresCpu {
  backends: number;
  walwriter: number;
  autovacuum: number;
  background: number;
  other: number;
  exited: number;
}

const KINDS = ["backends", "walwriter", "autovacuum", "background", "other", "exited"] as const;

/** The kind of a child of the postmaster, by its title ("postgres: walwriter", "postgres: user db 127.0.0.1(5432) idle"). */
export function postgresKind(title: string): Exclude<keyof PostgresCpu, "exited"> {
  const t = title.replace(/^postgres:\s*/, "");
  if (/^walwriter/.test(t)) return "walwriter";
  if (/^autovacuum/.test(t)) return "autovacuum";
  if (/^(checkpointer|background writer)/.test(t)) return "background";
  if (/^(logical replication|stats collector|archiver|walsender|walreceiver|startup|parallel worker|logger)/.test(t)) return "other";
  // "user database host(port) state": a client backend.
  return /^\S+ \S+ \S+/.test(t) ? "backends" : "other";
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Fields of /proc/PID/stat after the command name: ppid, and the reaped children's time. */
function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/**
 * The postmaster's pid from a backend of one's own connection (`SELECT pg_backend_pid(),
 * inet_client_port()`): undefined when that backend is not a process of this machine, told by
 * its title, which names the connection's client port ("[local]" over a Unix socket).
 */
export function postmasterOf(backendPid: number, clientPort: number | null): number | undefined {
  const stat = read(`/proc/${backendPid}/stat`);
  const title = read(`/proc/${backendPid}/cmdline`)?.replaceAll("\0", " ");
  if (!stat || !title?.startsWith("postgres:") || !title.includes(clientPort === null ? "[local]" : `(${clientPort})`)) return undefined;
  const ppid = Number(statFields(stat)[1]);
  return read(`/proc/${ppid}/stat`) !== undefined ? ppid : undefined;
}

/** One reading of the server's CPU by kind; undefined once the postmaster is gone. */
export function postgresCpuSeconds(postmaster: number): PostgresCpu | undefined {
  const pm = read(`/proc/${postmaster}/stat`);
  if (!pm) return undefined;
  const out: PostgresCpu = { backends: 0, walwriter: 0, autovacuum: 0, background: 0, other: statCpuSeconds(pm), exited: 0 };
  const f = statFields(pm);
  // cutime and cstime (fields 16 and 17 of stat): the time of children the postmaster has reaped.
  out.exited = (Number(f[13]) + Number(f[14])) / CLK_TCK;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = read(`/proc/${name}/stat`);
    if (!stat || Number(statFields(stat)[1]) !== postmaster) continue;
    const title = (read(`/proc/${name}/cmdline`) ?? "").replace(/\0+$/, "").replaceAll("\0", " ");
    out[postgresKind(title)] += statCpuSeconds(stat);
  }
  return out;
}

/** From two readings: µs of CPU per job in each part. A child that exited between them moves its time from its kind to `exited`. */
export function postgresPerJob(before: PostgresCpu, after: PostgresCpu, jobs: number): PostgresCpu {
  const out = {} as PostgresCpu;
  for (const k of KINDS) out[k] = ((after[k] - before[k]) / jobs) * 1e6;
  return out;
}
