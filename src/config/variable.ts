// What one row of the variables table (variables.ts) holds.
import type * as v from "valibot";
export type ServerMode = "api" | "dispatcher" | "worker";

export const SECTIONS = [
  "Storage, HTTP and logs",
  "API and auth",
  "Calls (workers)",
  "Dispatch",
  "Flow control",
  "Retention",
  "Regions",
  "Redis due-time index",
  "Test only (never in production)",
] as const;
export type Section = (typeof SECTIONS)[number];

export interface Variable {
  schema: v.GenericSchema<string, unknown>;
  section: Section;
  /** The modes whose processes act on it. */
  readBy: "all" | readonly ServerMode[];
  /** One line, for --help and the README (backticks mark names and values). */
  doc: string;
  /** More for the README's table only. */
  more?: string;
  /** The raw value in force when the variable is unset (or empty), parsed by `schema`. */
  default?: string;
  /** How to document a default that is computed or absent ("unlimited"). */
  shownDefault?: string;
  /** Holds a secret: an error never shows the value. */
  secret?: true;
  /** A URL: an error shows it without its password. */
  url?: true;
  /** The schema's messages quote the bad entry themselves: the whole value is not echoed. */
  quiet?: true;
  /** An empty value is a value (checked), not "unset". */
  emptyIsSet?: true;
  /** A command-line flag that, when given, replaces the variable (which is then not read). */
  flag?: "port" | "region";
}
