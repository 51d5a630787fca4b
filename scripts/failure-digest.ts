// Prints each failed test of a `bun test --reporter=junit` report: file:line, name, and the
// first lines of its error. `npm test` prints this just before its closing line because CI
// keeps only the tail of the output, and with test files run in parallel bun prints a
// failure's error away from its "(fail)" line, often thousands of lines up: without this,
// a red run said which test failed but not which assertion, or by how much.
//
//   bun scripts/failure-digest.ts <junit.xml>

const MAX_LINES = 12;

const xmlText = (s: string) =>
  s
    .replace(/&#10;/g, "\n")
    .replace(/&#13;/g, "")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&#(\d+);/g, (_, n) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, "&");

const attr = (tag: string, name: string) => xmlText(new RegExp(`\\b${name}="([^"]*)"`).exec(tag)?.[1] ?? "");

export function failureDigest(xml: string): string[] {
  const out: string[] = [];
  // A failed case: <testcase …> <failure …>text</failure> (or <error …>) </testcase>; a
  // passed one is usually <testcase … />, with no body.
  const cases = xml.matchAll(/<testcase\b(?:[^>"]|"[^"]*")*?\/>|<testcase\b((?:[^>"]|"[^"]*")*)>([\s\S]*?)<\/testcase>/g);
  for (const [, head, body] of cases) {
    if (head === undefined || body === undefined) continue;
    const fail = /<(failure|error)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/.exec(body);
    if (!fail) continue;
    // An empty body (<failure message="…"></failure>) says nothing: the message then.
    const text = xmlText(fail[3] || attr(fail[2]!, "message")).trim();
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    const shown = lines.slice(0, MAX_LINES).map((l) => `    ${l}`);
    if (lines.length > MAX_LINES) shown.push(`    … ${lines.length - MAX_LINES} more lines`);
    const suite = attr(head, "classname");
    out.push(`  ${attr(head, "file")}:${attr(head, "line")}  ${suite ? `${suite} > ` : ""}${attr(head, "name")}`, ...shown);
  }
  return out;
}

if (import.meta.main) {
  const path = process.argv[2];
  if (!path) {
    console.error("usage: bun scripts/failure-digest.ts <junit.xml>");
    process.exit(2);
  }
  const file = Bun.file(path);
  if (!(await file.exists())) process.exit(0);
  const lines = failureDigest(await file.text());
  if (lines.length > 0) console.log(["", "test: the failures again, with their errors:", ...lines].join("\n"));
}
