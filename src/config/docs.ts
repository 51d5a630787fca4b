// The table of variables as people read it: the Environment part of `scheduler --help`, and
// the README's Configuration section (scripts/gen-config-docs.ts writes it there).
import { OTHER_PROGRAMS, OTHER_PROGRAMS_PREFIX, SECTIONS, VARIABLE_NAMES, VARIABLES, type Variable, type VariableName } from "./variables.ts";

const row = (name: VariableName): Variable => VARIABLES[name];
const inSection = (section: string) => VARIABLE_NAMES.filter((n) => row(n).section === section);
const readBy = (r: Variable) => (r.readBy === "all" ? "all" : r.readBy.join(", "));
const plain = (s: string) => s.replaceAll("`", "");
const others = () => [...Object.keys(OTHER_PROGRAMS), `${OTHER_PROGRAMS_PREFIX}*`];

/** `--help`'s Environment part: one line per variable, NAME=default, under its section. */
export function helpEnvironment(): string {
  const lines = ["Environment (all optional; NAME=default; [modes] when only some modes read it):"];
  const width = Math.max(...VARIABLE_NAMES.map((n) => helpName(n).length)) + 2;
  for (const section of SECTIONS) {
    lines.push(`  ${section}:`);
    for (const name of inSection(section)) {
      const r = row(name);
      const computed = r.default === undefined && r.shownDefault ? ` (default: ${plain(r.shownDefault)})` : "";
      const modes = r.readBy === "all" ? "" : ` [${readBy(r)}]`;
      lines.push(`    ${helpName(name).padEnd(width)}${plain(r.doc)}${computed}${modes}`);
    }
  }
  lines.push("  Any other SCHEDULER_* name stops the start, but for the CLI's, the tests' and the benches' own");
  lines.push(`  (${others().join(", ")}). The README's Configuration section says more about each variable.`);
  return `${lines.join("\n")}\n`;
}

const helpName = (name: VariableName) => (row(name).default !== undefined ? `${name}=${row(name).default}` : name);

export const README_BEGIN = "<!-- config-table:begin (generated from src/config/variables.ts by `npm run gen:config-docs`: edit there) -->";
export const README_END = "<!-- config-table:end -->";

/** The README's Configuration section, between its markers. */
export function readmeConfiguration(): string {
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const out = [
    README_BEGIN,
    "Everything is optional. At start-up every bad value is reported at once, one line each naming",
    "the variable and what to do, and a `SCHEDULER_*` name that is not below stops the start with the",
    `nearest one that is ("did you mean …?"). Let be: the CLI's, the tests' and the benches' own`,
    `(${others()
      .map((n) => `\`${n}\``)
      .join(", ")}).`,
    "*Read by*: the modes (`--mode`) whose processes act on the variable.",
  ];
  for (const section of SECTIONS) {
    out.push("", `**${section}**`, "", "| variable | default | read by | meaning |", "|---|---|---|---|");
    for (const name of inSection(section)) {
      const r = row(name);
      const dflt = r.default !== undefined ? `\`${r.default}\`` : (r.shownDefault ?? "—");
      out.push(`| \`${name}\` | ${cell(dflt)} | ${readBy(r)} | ${cell(r.doc + (r.more ?? ""))} |`);
    }
  }
  out.push(README_END);
  return `${out.join("\n")}\n`;
}

/** `readme` with its Configuration section replaced by the one the table gives. */
export function withReadmeConfiguration(readme: string): string {
  const begin = readme.indexOf(README_BEGIN);
  const end = readme.indexOf(README_END);
  if (begin < 0 || end < begin) throw new Error(`README.md has no ${README_BEGIN} … ${README_END} section`);
  return readme.slice(0, begin) + readmeConfiguration() + readme.slice(end + README_END.length + 1);
}
