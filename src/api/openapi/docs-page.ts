// GET /docs: the OpenAPI document as one static HTML page. Rendered here, with no script
// and nothing fetched: the page works offline and inside the compiled binary.

// biome-ignore lint/suspicious/noExplicitAny: the page walks an OpenAPI document, whose shape the schema (not TypeScript) vouches for
type Json = Record<string, any>;

const esc = (s: unknown) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** Descriptions use `code` spans and nothing else of Markdown. */
const text = (s: string | undefined) =>
  s
    ? esc(s)
        .replace(/`([^`]+)`/g, "<code>$1</code>")
        .replace(/\n\n/g, "<br>")
    : "";
const refName = (ref: string) => ref.slice(ref.lastIndexOf("/") + 1);
const refLink = (ref: string) => `<a href="#schema-${esc(refName(ref))}">${esc(refName(ref))}</a>`;

/** A one-line type: "string", "integer", "Job", "array of Job", "one of a, b", "X or null". */
function typeOf(s: Json | undefined): string {
  if (!s || Object.keys(s).filter((k) => k !== "description" && k !== "default").length === 0) return "any JSON";
  if (s.$ref) return refLink(s.$ref);
  if (s.const !== undefined) return `<code>${esc(JSON.stringify(s.const))}</code>`;
  if (s.enum) return `one of ${s.enum.map((e: unknown) => `<code>${esc(e)}</code>`).join(", ")}`;
  if (s.anyOf) return s.anyOf.map(typeOf).join(" or ");
  if (s.type === "array") return `array of ${typeOf(s.items)}`;
  if (s.type === "object" && !s.properties && s.additionalProperties) return `object of ${typeOf(s.additionalProperties)}`;
  return esc(s.format ? `${s.type} (${s.format})` : (s.type ?? "any JSON"));
}

function constraints(s: Json): string {
  const c: string[] = [];
  for (const x of [s, ...(s.anyOf ?? [])] as Json[]) {
    if (x.minimum !== undefined) c.push(`≥ ${x.minimum}`);
    if (x.maximum !== undefined) c.push(`≤ ${x.maximum}`);
    if (x.minLength !== undefined) c.push(`length ≥ ${x.minLength}`);
    if (x.maxLength !== undefined) c.push(`length ≤ ${x.maxLength}`);
    if (x.maxItems !== undefined) c.push(`≤ ${x.maxItems} items`);
    if (x.pattern !== undefined) c.push(`matches <code>${esc(x.pattern)}</code>`);
  }
  if (s.default !== undefined) c.push(`default <code>${esc(JSON.stringify(s.default))}</code>`);
  return c.join("; ");
}

const description = (s: Json): string | undefined => s.description ?? s.anyOf?.find((x: Json) => x.description)?.description;

/** The inline object inside a schema (itself, an array's item, or one branch of anyOf), if any. */
function inlineObject(s: Json): Json | undefined {
  if (s.type === "object" && s.properties) return s;
  if (s.type === "array" && s.items) return inlineObject(s.items);
  for (const x of s.anyOf ?? []) {
    const o = inlineObject(x);
    if (o) return o;
  }
  return undefined;
}

type Resolve = (ref: string) => Json | undefined;

/**
 * One row per field, nested objects flattened as a.b and a[].b; a field that names a
 * component (target → Target) is opened in place too, so a request body reads top to bottom.
 */
function fieldRows(obj: Json, resolve: Resolve, prefix = "", open: ReadonlySet<string> = new Set()): string {
  const required = new Set<string>(obj.required ?? []);
  return Object.entries<Json>(obj.properties ?? {})
    .map(([name, s]: [string, Json]) => {
      const full = `${prefix}${name}`;
      const row = `<tr><td><code>${esc(full)}</code>${required.has(name) ? ' <span class="req">required</span>' : ""}</td><td>${typeOf(s)}</td><td>${[text(description(s)), constraints(s)].filter(Boolean).join("<br>")}</td></tr>`;
      const ref: string | undefined = s.$ref ?? s.items?.$ref;
      const target = ref ? (open.has(ref) ? undefined : resolve(ref)) : s;
      const inner = target && inlineObject(target);
      return row + (inner ? fieldRows(inner, resolve, `${full}${s.type === "array" ? "[]" : ""}.`, ref ? new Set([...open, ref]) : open) : "");
    })
    .join("");
}

/** `expand`: open a top-level $ref (a request body) instead of only linking to it. */
function schemaBlock(s: Json | undefined, resolve: Resolve, expand = false): string {
  if (!s) return "";
  const target = s.$ref ? (expand ? resolve(s.$ref) : undefined) : s;
  const obj = target && inlineObject(target);
  const head = `<p>${typeOf(s)}${obj && obj.additionalProperties === false ? " (no other fields)" : ""}</p>`;
  return head + (obj ? `<table><tr><th>field</th><th>type</th><th>notes</th></tr>${fieldRows(obj, resolve, "", new Set(s.$ref ? [s.$ref] : []))}</table>` : "");
}

function operation(method: string, path: string, op: Json, resolve: Resolve): string {
  const params = (op.parameters ?? []) as Json[];
  const body = op.requestBody?.content?.["application/json"]?.schema;
  return `<section class="op" id="${esc(op.operationId)}">
<h3><span class="m m-${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code>${op.security?.length === 0 ? ' <span class="open">no token</span>' : ""}</h3>
<p><b>${text(op.summary)}</b></p><p>${text(op.description)}</p>
${params.length ? `<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th>notes</th></tr>${params.map((p) => `<tr><td><code>${esc(p.name)}</code>${p.required ? ' <span class="req">required</span>' : ""}</td><td>${esc(p.in)}</td><td>${typeOf(p.schema)}</td><td>${[text(p.description), constraints(p.schema ?? {})].filter(Boolean).join("<br>")}</td></tr>`).join("")}</table>` : ""}
${body ? `<h4>Request body${op.requestBody.required ? "" : " (optional)"}</h4>${schemaBlock(body, resolve, true)}` : ""}
<h4>Responses</h4><table><tr><th>status</th><th>meaning</th><th>body</th></tr>${Object.entries<Json>(op.responses ?? {})
    .map(([status, r]: [string, Json]) => {
      const [type, media] = Object.entries(r.content ?? {})[0] ?? [];
      return `<tr><td>${esc(status)}</td><td>${text(r.description)}</td><td>${media ? `${typeOf((media as Json).schema)}${type !== "application/json" ? ` (${esc(type)})` : ""}` : ""}</td></tr>`;
    })
    .join("")}</table>
</section>`;
}

/** The whole page for an OpenAPI 3.1 document. */
export function renderDocsPage(doc: Json): string {
  const ops: { tag: string; method: string; path: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) ops.push({ tag: op.tags?.[0] ?? "Other", method, path, op });
  }
  const tags = [...new Set(ops.map((o) => o.tag))];
  const resolve: Resolve = (ref) => doc.components?.schemas?.[refName(ref)];
  const toc = tags
    .map(
      (t) =>
        `<li>${esc(t)}<ul>${ops
          .filter((o) => o.tag === t)
          .map((o) => `<li><a href="#${esc(o.op.operationId)}"><code>${esc(o.method.toUpperCase())} ${esc(o.path)}</code></a> ${text(o.op.summary)}</li>`)
          .join("")}</ul></li>`,
    )
    .join("");
  const schemas = Object.entries((doc.components?.schemas ?? {}) as Json)
    .map(
      ([name, s]) => `<section class="schema" id="schema-${esc(name)}"><h3>${esc(name)}</h3><p>${text(description(s))}</p>${schemaBlock(s, resolve)}</section>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(doc.info.title)} ${esc(doc.info.version)} — API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:0 auto;padding:1rem 2rem;color:#222}
code{font:13px ui-monospace,monospace;background:#f3f3f3;padding:0 .2em;border-radius:3px}
table{border-collapse:collapse;width:100%;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#fafafa}.op,.schema{border-top:1px solid #ccc;padding-top:.5rem;margin-top:1.5rem}
.m{display:inline-block;min-width:4.5em;font:bold 13px ui-monospace,monospace;color:#fff;background:#555;border-radius:3px;text-align:center}
.m-get{background:#2b6cb0}.m-post{background:#2f855a}.m-patch{background:#b7791f}.m-delete{background:#c53030}
.req{color:#c53030;font-size:12px}.open{font-size:12px;background:#e6fffa;color:#234e52;padding:0 .3em;border-radius:3px}
</style></head><body>
<h1>${esc(doc.info.title)} ${esc(doc.info.version)} — API reference</h1>
<p>${text(doc.info.description)}</p>
<p>Send <code>Authorization: Bearer &lt;token&gt;</code> except where a route says <span class="open">no token</span>. ${text(doc.components?.securitySchemes?.bearer?.description)} Errors have one shape: ${refLink("#/components/schemas/Error")}. The machine-readable document: <a href="openapi.json"><code>/openapi.json</code></a> (OpenAPI ${esc(doc.openapi)}).</p>
<h2>Routes</h2><ul>${toc}</ul>
${tags
  .map(
    (t) =>
      `<h2>${esc(t)}</h2>${ops
        .filter((o) => o.tag === t)
        .map((o) => operation(o.method, o.path, o.op, resolve))
        .join("\n")}`,
  )
  .join("\n")}
<h2>Schemas</h2>
${schemas}
</body></html>
`;
}
