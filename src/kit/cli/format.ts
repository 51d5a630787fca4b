/** Output of the resource commands: JSON as the API gives it, or a table for people. */
export type OutputFormat = "json" | "table";

export interface Column<T> {
  head: string;
  cell: (row: T) => unknown;
}

const text = (v: unknown): string => (v === null || v === undefined ? "-" : typeof v === "object" ? JSON.stringify(v) : String(v));

/** Left-aligned columns, two spaces apart, a header row in capitals. */
export function table<T>(rows: T[], columns: Column<T>[]): string {
  const cells = [columns.map((c) => c.head), ...rows.map((r) => columns.map((c) => text(c.cell(r))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return `${cells
    .map((row) =>
      row
        .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i])))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}

/** One object as "key: value" lines (nested values as JSON). */
export function details(obj: Record<string, unknown>): string {
  const keys = Object.keys(obj);
  const w = Math.max(...keys.map((k) => k.length));
  return `${keys.map((k) => `${(`${k}:`).padEnd(w + 1)} ${text(obj[k])}`).join("\n")}\n`;
}

export const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
