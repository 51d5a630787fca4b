// The receiver's SQL lives in sql/kit/receiver.sql as named queries, bundled as text.
import text from "../../../sql/kit/receiver.sql" with { type: "text" };

const QUERIES = new Map<string, string>();
{
  let name: string | undefined;
  let body: string[] = [];
  const flush = () => {
    if (name) QUERIES.set(name, body.join("\n").trim().replace(/;$/, ""));
  };
  for (const line of text.split("\n")) {
    const m = /^--\s*name:\s*(\w+)/.exec(line);
    if (m) {
      flush();
      name = m[1];
      body = [];
    } else if (name) body.push(line);
  }
  flush();
}

export function query(name: string): string {
  const q = QUERIES.get(name);
  if (!q) throw new Error(`receiver query ${name} is missing from sql/kit/receiver.sql`);
  return q;
}
