/**
 * What every bench prints about where it ran: the machine and the PostgreSQL settings that move
 * its figures most. One module so that no bench can leave out the line that says whether its
 * server was durable: a figure from a server without fsync hides the cost of every commit.
 */
import type { Machine } from "./machine.ts";

/** The settings printed by every bench (those that move delivery figures most). */
export const SETTINGS = [
  "fsync",
  "synchronous_commit",
  "full_page_writes",
  "wal_level",
  "shared_buffers",
  "work_mem",
  "max_connections",
  "autovacuum",
  "shared_preload_libraries",
] as const;

export interface ServerInfo {
  /** SELECT version(). */
  version: string;
  settings: Record<string, string>;
  /** fsync and synchronous_commit on, full_page_writes on: what production runs. */
  durable: boolean;
  /** pg_stat_statements can be read (loaded and the extension created). */
  statements: boolean;
}

type Query = <T>(sql: string) => Promise<T[]>;

export async function describeServer(query: Query): Promise<ServerInfo> {
  const [{ version }] = await query<{ version: string }>("SELECT version() AS version");
  const rows = await query<{ name: string; setting: string }>(
    `SELECT name, current_setting(name) AS setting FROM pg_settings WHERE name IN (${SETTINGS.map((s) => `'${s}'`).join(", ")})`,
  );
  const settings = Object.fromEntries(SETTINGS.map((n) => [n, rows.find((r) => r.name === n)?.setting ?? "?"]));
  let statements = false;
  try {
    await query("SELECT 1 FROM pg_stat_statements LIMIT 1");
    statements = true;
  } catch {
    // not loaded, or the extension is not created in this database
  }
  const durable = settings.fsync === "on" && settings.synchronous_commit === "on" && settings.full_page_writes === "on";
  return { version, settings, durable, statements };
}

/** One line: every setting, then whether the figures are durable ones. */
export function settingsLine(s: ServerInfo): string {
  const all = SETTINGS.map((n) => `${n}=${s.settings[n] || "''"}`).join(" ");
  return s.durable
    ? `${all} (durable: production settings)`
    : `${all} (NOT DURABLE: --fast / SCHEDULER_BENCH_FAST or a server set up so; commits cost less than in production)`;
}

/** The machine and server block every bench ends its report with. */
export function environmentRows(m: Machine, s: ServerInfo | undefined): [string, string][] {
  return [
    ["cpu", m.cpu],
    ["cores", String(m.cores)],
    ["memory", m.memory],
    ["os", m.os],
    ["bun", m.bun],
    ["postgres", m.postgres],
    ["pg settings", s ? settingsLine(s) : "- (embedded PGlite, not a server)"],
    ["driver", m.driver],
  ];
}
