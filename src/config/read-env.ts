// The environment read through the table: each variable checked by its schema, every problem
// collected (not only the first), and SCHEDULER_* names the table does not know refused with
// the nearest one it does.
import * as v from "valibot";
import { nearest } from "./nearest.ts";
import { shown } from "./shown.ts";
import { OTHER_PROGRAMS, OTHER_PROGRAMS_PREFIX, VARIABLE_NAMES, VARIABLES, type Variable, type VariableName } from "./variables.ts";

export type Env = Record<string, string | undefined>;

type Table = typeof VARIABLES;
type Output<K extends VariableName> = v.InferOutput<Table[K]["schema"]>;
/** Each variable's value: its default when unset, undefined only for those without one. */
export type Values = { [K in VariableName]: Table[K] extends { default: string } ? Output<K> : Output<K> | undefined };

export interface ReadEnv {
  values: Values;
  /** Variables set (to something the table reads) in the environment. */
  set: ReadonlySet<VariableName>;
  /** Variables whose value was refused: rules across variables skip them. */
  failed: ReadonlySet<VariableName>;
  /** One line each, naming the variable and what to do. */
  problems: string[];
}

const row = (name: VariableName): Variable => VARIABLES[name];

/** Unset, or empty where empty means unset. */
function isUnset(name: VariableName, raw: string | undefined): raw is undefined {
  return raw === undefined || (raw === "" && !row(name).emptyIsSet);
}

/** `skip`: variables a command-line flag replaces, which are then not read at all. */
export function readEnv(env: Env, skip: ReadonlySet<VariableName> = new Set()): ReadEnv {
  const problems = unknownNames(env);
  const values: Record<string, unknown> = {};
  const set = new Set<VariableName>();
  const failed = new Set<VariableName>();
  for (const name of VARIABLE_NAMES) {
    const raw = skip.has(name) ? undefined : env[name];
    if (isUnset(name, raw)) {
      values[name] = defaultOf(name);
      continue;
    }
    set.add(name);
    const r = v.safeParse(row(name).schema, raw);
    if (r.success) {
      values[name] = r.output;
    } else {
      failed.add(name);
      problems.push(`${name} ${r.issues[0].message}${row(name).quiet ? "" : ` (got ${JSON.stringify(shown(name, raw))})`}`);
    }
  }
  return { values: values as Values, set, failed, problems };
}

const defaults = new Map<VariableName, unknown>();

/** A row's default, parsed by its own schema (a default it refuses is a bug in the table). */
export function defaultOf(name: VariableName): unknown {
  if (defaults.has(name)) return defaults.get(name);
  const raw = row(name).default;
  let value: unknown;
  if (raw !== undefined) {
    const r = v.safeParse(row(name).schema, raw);
    if (!r.success) throw new Error(`the default of ${name}, ${JSON.stringify(raw)}, ${r.issues[0].message}`);
    value = r.output;
  }
  defaults.set(name, value);
  return value;
}

/** WORKER_CONCURRENCY is also compared as SCHEDULER_WORKER_CONCURRENCY, the name people guess. */
const withPrefix = (name: string) => (name.startsWith("SCHEDULER_") ? [name] : [name, `SCHEDULER_${name}`]);

function unknownNames(env: Env): string[] {
  const problems: string[] = [];
  for (const name of Object.keys(env)) {
    if (!name.startsWith("SCHEDULER_") || Object.hasOwn(VARIABLES, name) || Object.hasOwn(OTHER_PROGRAMS, name) || name.startsWith(OTHER_PROGRAMS_PREFIX))
      continue;
    if (env[name] === undefined) continue;
    problems.push(
      `${name} is not a setting of the scheduler: did you mean ${nearest(name, VARIABLE_NAMES, withPrefix)}? (rename or unset it; scheduler --help lists every variable)`,
    );
  }
  return problems;
}
