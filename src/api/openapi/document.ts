import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from "@valibot/to-json-schema";
import type * as v from "valibot";
import { COMPONENTS } from "./components.ts";
import type { Response, RouteDoc } from "./route-doc.ts";
import { jobsDocs } from "./jobs-docs.ts";
import { opsDocs } from "./ops-docs.ts";
import { schedulesDocs } from "./schedules-docs.ts";
import { dlqDocs } from "./dlq-docs.ts";
import { asyncDocs } from "./async-docs.ts";
import { signingKeysDocs } from "./signing-keys-docs.ts";

/** Every documented route. A new area's list goes here. */
export const ROUTE_DOCS: RouteDoc[] = [...opsDocs, ...jobsDocs, ...schedulesDocs, ...dlqDocs, ...asyncDocs, ...signingKeysDocs];

type Json = Record<string, unknown>;

/** /v1/jobs/:id → /v1/jobs/{id}. */
export const openApiPath = (honoPath: string) => honoPath.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

const REF = "#/components/schemas/";

const CONVERSION: ConversionConfig = {
  target: "draft-2020-12",
  // Requests are documented as sent: up to the first transform of each pipe (a duration
  // string before it becomes milliseconds).
  typeMode: "input",
  // check() holds rules JSON Schema cannot say (a real calendar date, a reserved header),
  // trim() only tidies what was sent;
  // the route still applies them. Anything else that does not convert fails the build of
  // the document, and so its test.
  ignoreActions: ["check", "trim"],
  errorMode: "throw",
  definitions: COMPONENTS,
  overrideRef: ({ referenceId }) => REF + referenceId,
  overrideSchema: ({ valibotSchema, jsonSchema }) => {
    // v.nullable(v.pipe(v.unknown(), v.check(isObject, message), v.strictObject(…))): a
    // message of our own first, then the real shape (host_limits). Input mode stops at the
    // second schema of a pipe and would say "anything"; document the shape. The library
    // shows overrideSchema only the pipe's first item, so this looks from the wrapper.
    const s = valibotSchema as { type: string; wrapped?: { type: string; pipe?: readonly { kind: string }[] } };
    if (s.type !== "nullable" || s.wrapped?.type !== "unknown" || !s.wrapped.pipe) return undefined;
    const shape = s.wrapped.pipe.slice(1).find((x) => x.kind === "schema");
    // Without definitions: converting with them converts each of them again, this one too.
    const inner = shape && toJsonSchema(shape as v.GenericSchema, { ...CONVERSION, definitions: undefined, overrideSchema: undefined });
    return inner ? { ...jsonSchema, anyOf: [clean(inner), { type: "null" }] } : undefined;
  },
};

function clean(s: JsonSchema): Json {
  // Definitions live in components.schemas; each conversion would repeat them.
  const { $schema: _s, $defs: _d, ...rest } = s as Json;
  return rest;
}

function convert(schema: v.GenericSchema): Json {
  return clean(toJsonSchema(schema, CONVERSION));
}

const schemaOf = (s: Response["schema"]): Json => (typeof s === "string" ? { $ref: REF + s } : convert(s!));

function parameters(doc: RouteDoc): Json[] {
  const out: Json[] = [];
  for (const [, name] of doc.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
    out.push({ name, in: "path", required: true, description: doc.params?.[name], schema: { type: "string" } });
  }
  for (const [name, entry] of Object.entries(doc.query?.entries ?? {})) {
    const { description, ...schema } = convert(entry);
    const optional = entry.type === "optional" || entry.type === "nullish";
    out.push({ name, in: "query", required: !optional, ...(description ? { description } : {}), schema });
  }
  return out;
}

function operation(doc: RouteDoc): Json {
  const op: Json = {
    operationId: `${doc.method}${openApiPath(doc.path).replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`,
    tags: [doc.tag],
    summary: doc.summary,
    description: [doc.description, doc.auth === "none" ? "No token needed." : `Scope: \`${doc.auth}\` (or \`admin\`).`].filter(Boolean).join("\n\n"),
  };
  const params = parameters(doc);
  if (params.length) op.parameters = params;
  if (doc.body) op.requestBody = { required: !doc.bodyOptional, content: { "application/json": { schema: convert(doc.body) } } };
  op.responses = Object.fromEntries(
    Object.entries(doc.responses)
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([status, r]) => [
        status,
        {
          description: r.description,
          ...(r.headers ? { headers: Object.fromEntries(Object.entries(r.headers).map(([h, d]) => [h, { description: d, schema: { type: "string" } }])) } : {}),
          ...(r.schema ? { content: { [r.contentType ?? "application/json"]: { schema: schemaOf(r.schema) } } } : {}),
        },
      ]),
  );
  // Routes without a token override the document-wide bearer requirement.
  if (doc.auth === "none") op.security = [];
  return op;
}

/** The OpenAPI 3.1 document of `docs`. */
export function buildOpenApi(version: string, docs: RouteDoc[] = ROUTE_DOCS): Json {
  const paths: Record<string, Json> = {};
  for (const d of docs) {
    const p = (paths[openApiPath(d.path)] ??= {});
    if (p[d.method]) throw new Error(`${d.method.toUpperCase()} ${d.path} is documented twice`);
    p[d.method] = operation(d);
  }
  const { definitions: _d, ...componentConversion } = CONVERSION;
  return {
    openapi: "3.1.0",
    info: {
      title: "scheduler",
      version,
      description:
        'Durable, distributed scheduler for HTTP webhook jobs. Durations: "250ms", "30s", "5m", "2h", "1d" or integer milliseconds; instants: RFC 3339 with an offset or Z; fields are snake_case.',
    },
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    security: [{ bearer: [] }],
    tags: [...new Set(docs.map((d) => d.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "A token from SCHEDULER_TOKENS (token:tenant:scope,scope;…). With none configured, the API serves loopback clients without a token.",
        },
      },
      schemas: Object.fromEntries(Object.entries(toJsonSchemaDefs(COMPONENTS, componentConversion)).map(([k, s]) => [k, clean(s)])),
    },
  };
}
