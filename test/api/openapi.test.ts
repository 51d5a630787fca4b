// GET /openapi.json and GET /docs: the document is valid OpenAPI 3.1, covers every route the
// app serves (and only those), its request schemas agree with the routes' validation, and
// real answers match its response schemas.
import { tokenSpec } from "../helpers/tokens.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { createApp } from "../../src/api/app.ts";
import { openApiPath } from "../../src/api/openapi/document.ts";
import { Metrics } from "../../src/obs/metrics.ts";
import { silentLogger } from "../../src/obs/log.ts";
import type { Runtime } from "../../src/runtime.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler, testConfig } from "../helpers/scheduler.ts";
import { bearer, HOOK } from "./support.ts";

/**
 * Routes that other branches are adding now (README "The HTTP API"): documented ahead of their code, so
 * not yet in the app. When one of them lands, delete it here (the test below fails until
 * you do, so the list cannot go stale).
 */
/** Documented routes not (yet) served: none now; a route documented ahead of its code goes here. */
const COMING_FROM_OTHER_BRANCHES = new Set<string>([]);

const TOKENS = tokenSpec("tokW:acme:jobs:read,jobs:write;tokAll:*:admin");
const W = bearer("tokW");
type Doc = Record<string, any>;

let tdb: TestDb;
let rt: Runtime;
let doc: Doc;
let ajv: Ajv2020;

beforeAll(async () => {
  tdb = await freshDb("postgres");
  rt = await startScheduler(tdb.db, { SCHEDULER_TOKENS: TOKENS }, { mode: "api" });
  const r = await api(rt, "GET", "/openapi.json");
  expect(r.status).toBe(200);
  doc = r.body;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // The whole document as one schema resource, so that #/components/schemas/… resolve.
  ajv.addSchema(doc, "openapi");
});
afterAll(async () => {
  await rt?.stop();
  await tdb?.close();
});

/** A validator for the schema at a JSON pointer of the document. */
const schemaAt = (...path: string[]) => ajv.compile({ $ref: `openapi#/${path.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/")}` });
const component = (name: string) => schemaAt("components", "schemas", name);
function expectValid(validate: ReturnType<typeof schemaAt>, value: unknown, what: string) {
  if (!validate(value)) throw new Error(`${what} does not match the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`);
}

describe("OpenAPI document", () => {
  test("is a valid OpenAPI 3.1 document with info, paths, components and a bearer scheme", async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(typeof doc.info.title).toBe("string");
    expect(typeof doc.info.version).toBe("string");
    expect(Object.keys(doc.paths).length).toBeGreaterThan(10);
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(["Job", "Schedule", "Error", "JobPage", "JobInput"]));
    expect(doc.components.securitySchemes.bearer).toEqual(expect.objectContaining({ type: "http", scheme: "bearer" }));
    expect(doc.security).toEqual([{ bearer: [] }]);
    const result = await new Validator({ strict: false }).validate(structuredClone(doc));
    if (!result.valid) throw new Error(`not valid OpenAPI 3.1: ${JSON.stringify(result.errors).slice(0, 2000)}`);
    // Every schema compiles (refs resolve, keywords are JSON Schema 2020-12).
    for (const name of Object.keys(doc.components.schemas)) component(name);
  });

  test("documents every route of the app, and only routes of the app (plus those coming from other branches)", async () => {
    const app = createApp({ db: tdb.db, config: testConfig(), metrics: new Metrics(), log: silentLogger, serveApi: true });
    const served = new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${openApiPath(r.path)}`));
    const documented = new Set(Object.entries(doc.paths as Doc).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)));
    expect(served.size).toBeGreaterThan(15);
    expect([...served].filter((r) => !documented.has(r))).toEqual([]);
    expect([...documented].filter((r) => !served.has(r)).sort()).toEqual([...COMING_FROM_OTHER_BRANCHES].sort());
    // A route that landed must leave the allow-list.
    expect([...COMING_FROM_OTHER_BRANCHES].filter((r) => served.has(r))).toEqual([]);
  });

  test("no-token routes say so; every other route needs the bearer token", () => {
    const open = Object.entries(doc.paths as Doc).flatMap(([path, item]) =>
      Object.entries(item as Doc)
        .filter(([, op]) => Array.isArray(op.security) && op.security.length === 0)
        .map(([m]) => `${m.toUpperCase()} ${path}`),
    );
    // The async callbacks take the job's lease token in the body instead of a bearer token.
    expect(open.sort()).toEqual([
      "GET /docs",
      "GET /healthz",
      "GET /metrics",
      "GET /openapi.json",
      "GET /readyz",
      "GET /ui",
      "GET /ui/{file}",
      "POST /v1/jobs/{id}/complete",
      "POST /v1/jobs/{id}/heartbeat",
    ]);
  });

  test("the POST /v1/jobs request schema accepts and rejects what the route does", async () => {
    const op = doc.paths["/v1/jobs"].post;
    expect(op.requestBody.required).toBe(true);
    const body = op.requestBody.content["application/json"].schema;
    const input = body.$ref ? doc.components.schemas[body.$ref.split("/").pop()] : body;
    expect(input.required).toContain("target");
    expect(input.properties.priority.type).toBe("integer");
    expect(input.additionalProperties).toBe(false);
    const validate = schemaAt("paths", "/v1/jobs", "post", "requestBody", "content", "application/json", "schema");
    const t = { url: HOOK };
    const cases: [unknown, boolean][] = [
      [{ target: t }, true],
      [{ target: { ...t, method: "put", headers: { "x-a": "b" }, body: { any: ["json"] } }, priority: 5, delay: "30s" }, true],
      [
        { target: { ...t, body_text: "plain" }, run_at: "2030-12-01T09:00:00Z", retry: { max_attempts: 3, base: "1s", max: 60000 }, timeout: "5s", window: 0 },
        true,
      ],
      [{ target: t, idempotency_key: `k-${Bun.randomUUIDv7()}`, host_limits: { rate: 5, concurrency: 2 } }, true],
      [{ target: t, host_limits: null, tenant: "acme" }, true],
      [{}, false],
      [{ priority: 1 }, false],
      [{ target: t, priority: 1.5 }, false],
      [{ target: t, priority: "high" }, false],
      [{ target: t, priority: 5000 }, false],
      [{ target: t, surprise: 1 }, false],
      [{ target: { method: "POST" } }, false],
      [{ target: { ...t, extra: true } }, false],
      [{ target: { ...t, headers: { "x-a": 1 } } }, false],
      [{ target: t, retry: { max_attempts: 0 } }, false],
      [{ target: t, idempotency_key: "" }, false],
      [{ target: t, run_at: "tomorrow" }, false],
      [{ target: t, async: "yes" }, false],
      [{ target: t, delay: true }, false],
      [{ target: t, host_limits: { rate: 1, burst: 2 } }, false],
      [{ target: t, tenant: "no spaces" }, false],
    ];
    for (const [example, ok] of cases) {
      const r = await api(rt, "POST", "/v1/jobs", example, W);
      const what = JSON.stringify(example);
      expect({ what, route: r.status }).toEqual({ what, route: ok ? 201 : 400 });
      expect({ what, document: validate(example) }).toEqual({ what, document: ok });
    }
  });

  test("real answers match the documented response schemas", async () => {
    const created = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK, body: { a: 1 } }, delay: "1h", host_limits: { rate: 2 } }, W);
    expect(created.status).toBe(201);
    expectValid(component("Job"), created.body, "POST /v1/jobs 201");
    const got = await api(rt, "GET", `/v1/jobs/${created.body.id}`, undefined, W);
    expect(Array.isArray(got.body.attempt_log)).toBe(true);
    expectValid(component("Job"), got.body, "GET /v1/jobs/{id}");
    const list = await api(rt, "GET", "/v1/jobs?limit=1", undefined, W);
    expect(list.body.items.length).toBe(1);
    expectValid(component("JobPage"), list.body, "GET /v1/jobs");
    const batch = await api(rt, "POST", "/v1/jobs/batch", { jobs: [{ target: { url: HOOK } }, { target: {} }] }, W);
    expectValid(schemaAt("paths", "/v1/jobs/batch", "post", "responses", "200", "content", "application/json", "schema"), batch.body, "POST /v1/jobs/batch");
    const bad = await api(rt, "POST", "/v1/jobs", { target: { url: HOOK }, priority: "x" }, W);
    expect(bad.status).toBe(400);
    expectValid(component("Error"), bad.body, "a 400");
    const sched = await api(rt, "POST", "/v1/schedules", { cron: "0 9 * * 1-5", timezone: "America/New_York", target: { url: HOOK }, dst: { gap: "skip" } }, W);
    expect(sched.status).toBe(201);
    expectValid(component("Schedule"), sched.body, "POST /v1/schedules 201");
    const preview = await api(rt, "GET", `/v1/schedules/${sched.body.id}?preview=3`, undefined, W);
    expect(preview.body.preview.length).toBe(3);
    expectValid(component("Schedule"), preview.body, "GET /v1/schedules/{id}?preview=3");
    const schedules = await api(rt, "GET", "/v1/schedules", undefined, W);
    expectValid(component("SchedulePage"), schedules.body, "GET /v1/schedules");
    const cluster = await api(rt, "GET", "/v1/cluster", undefined, W);
    expect(cluster.status).toBe(200);
    expectValid(component("Cluster"), cluster.body, "GET /v1/cluster");
    const key = await api(rt, "POST", "/v1/signing-keys", { tenant: "acme" }, bearer("tokAll"));
    expect(key.status).toBe(201);
    expectValid(
      schemaAt("paths", "/v1/signing-keys", "post", "responses", "201", "content", "application/json", "schema"),
      key.body,
      "POST /v1/signing-keys 201",
    );
    const rotated = await api(rt, "POST", `/v1/signing-keys/${key.body.id}/rotate`, { overlap: "1h" }, bearer("tokAll"));
    expectValid(
      schemaAt("paths", "/v1/signing-keys/{id}/rotate", "post", "responses", "201", "content", "application/json", "schema"),
      rotated.body,
      "POST /v1/signing-keys/{id}/rotate 201",
    );
    const retired = await api(rt, "POST", `/v1/signing-keys/${key.body.id}/retire`, {}, bearer("tokAll"));
    expectValid(component("SigningKey"), retired.body, "POST /v1/signing-keys/{id}/retire");
    const keys = await api(rt, "GET", "/v1/signing-keys", undefined, bearer("tokAll"));
    expect(keys.body.items.length).toBe(2);
    expectValid(component("SigningKeyList"), keys.body, "GET /v1/signing-keys");
    // And the check can fail: a job without its id is not a Job.
    const { id: _id, ...noId } = created.body;
    expect(component("Job")(noId)).toBe(false);
  });

  test("/docs is one HTML page that names every documented route", async () => {
    const res = await fetch(`${rt.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    const html = await res.text();
    expect(html).toStartWith("<!doctype html>");
    for (const [path, item] of Object.entries(doc.paths as Doc)) {
      expect(html).toContain(`<code>${path}</code>`);
      for (const m of Object.keys(item)) expect(html).toContain(`<code>${m.toUpperCase()} ${path}</code>`);
    }
    // Field-level detail, from the schemas: the job input's fields and the schedule's misfire values.
    expect(html).toContain("<code>target.url</code>");
    expect(html).toContain("<code>fire_once</code>");
    // Nothing to fetch: no scripts, stylesheets or images from anywhere.
    expect(html).not.toMatch(/<script|<link|<img|src=/i);
  });

  test("both are served without a token while SCHEDULER_TOKENS is set", async () => {
    expect((await api(rt, "GET", "/v1/jobs")).status).toBe(401);
    const json = await fetch(`${rt.url}/openapi.json`);
    expect(json.status).toBe(200);
    expect(json.headers.get("content-type")).toContain("application/json");
    expect(((await json.json()) as Doc).openapi).toStartWith("3.1");
    expect((await fetch(`${rt.url}/docs`)).status).toBe(200);
    // A bad token is not looked at either.
    expect((await api(rt, "GET", "/openapi.json", undefined, bearer("nope"))).status).toBe(200);
  });
});
