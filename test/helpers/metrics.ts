/** One scrape of /metrics as series → value; a series is `name` or `name{labels as printed}`. */
export async function scrape(baseUrl: string): Promise<Map<string, number>> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** A series' value; throws when the series is absent, so a missing metric fails the test. */
export function series(m: Map<string, number>, key: string): number {
  const v = m.get(key);
  if (v === undefined) throw new Error(`metric series ${key} is missing`);
  return v;
}
