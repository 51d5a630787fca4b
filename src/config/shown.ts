import { VARIABLES, type Variable } from "./variables.ts";

const flags = (key: string): Partial<Variable> => (Object.hasOwn(VARIABLES, key) ? VARIABLES[key as keyof typeof VARIABLES] : {});

/** A value as a start-up error may show it: URLs without their password, secrets not at all. */
export function shown(key: string, raw: string): string {
  if (flags(key).secret) return `[${raw.length} characters, not shown]`;
  if (!flags(key).url) return raw;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    // Not a URL (that may be the error): anything with an @ may hold credentials.
    return raw.includes("@") ? `[${raw.length} characters, not shown]` : raw;
  }
  // An @ that is not before the host ("user:pass@" in the wrong place) may still be a secret.
  if (u.username === "" && u.password === "" && raw.includes("@")) return `[${raw.length} characters, not shown]`;
  if (u.password !== "") u.password = "***";
  for (const k of [...u.searchParams.keys()]) if (/pass|token|secret|key/i.test(k)) u.searchParams.set(k, "***");
  return u.href;
}
