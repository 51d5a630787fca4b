// Named queries live in sql/queries/*.sql, each under a `-- name: X` line. They are imported
// as text (so the compiled binary carries them) and looked up by name; nothing else in the
// code base writes ad-hoc SQL.
import jobsSql from "../../sql/queries/jobs.sql" with { type: "text" };
import dispatchSql from "../../sql/queries/dispatch.sql" with { type: "text" };
import workerSql from "../../sql/queries/worker.sql" with { type: "text" };
import leasesSql from "../../sql/queries/leases.sql" with { type: "text" };
import metricsSql from "../../sql/queries/metrics.sql" with { type: "text" };
import schedulesSql from "../../sql/queries/schedules.sql" with { type: "text" };
import indexSql from "../../sql/queries/index.sql" with { type: "text" };
import authoritySql from "../../sql/queries/authority.sql" with { type: "text" };
import statsSql from "../../sql/queries/stats.sql" with { type: "text" };
import shardsSql from "../../sql/queries/shards.sql" with { type: "text" };
import asyncSql from "../../sql/queries/async.sql" with { type: "text" };
import payloadsSql from "../../sql/queries/payloads.sql" with { type: "text" };
import retentionSql from "../../sql/queries/retention.sql" with { type: "text" };
import dlqSql from "../../sql/queries/dlq.sql" with { type: "text" };
import auditSql from "../../sql/queries/audit.sql" with { type: "text" };
import signingKeysSql from "../../sql/queries/signing-keys.sql" with { type: "text" };
import verifySql from "../../sql/queries/verify.sql" with { type: "text" };

export function parseNamedQueries(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let name: string | undefined;
  let body: string[] = [];
  const flush = () => {
    if (name) out.set(name, body.join("\n").trim().replace(/;$/, ""));
  };
  for (const line of text.split("\n")) {
    const m = /^--\s*name:\s*(\w+)/.exec(line);
    if (m) {
      flush();
      name = m[1];
      body = [];
    } else if (name) {
      body.push(line);
    }
  }
  flush();
  return out;
}

const QUERIES = new Map<string, string>();
for (const file of [
  jobsSql,
  dispatchSql,
  workerSql,
  leasesSql,
  metricsSql,
  schedulesSql,
  indexSql,
  authoritySql,
  statsSql,
  shardsSql,
  asyncSql,
  payloadsSql,
  retentionSql,
  dlqSql,
  auditSql,
  signingKeysSql,
  verifySql,
]) {
  for (const [k, v] of parseNamedQueries(file)) {
    if (QUERIES.has(k)) throw new Error(`query ${k} is defined twice in sql/queries`);
    QUERIES.set(k, v);
  }
}

// A line `-- use: _Name` stands for the text of the fragment _Name: a named query whose name
// starts with `_`, the shared part of two statements (never run alone). One level deep.
for (const [k, v] of QUERIES) {
  if (!v.includes("-- use: ")) continue;
  QUERIES.set(
    k,
    v.replace(/^-- use: (\w+)$/gm, (_, name: string) => {
      const part = QUERIES.get(name);
      if (!name.startsWith("_") || part === undefined) throw new Error(`query ${k} uses ${name}, which is not a fragment (-- name: _X) in sql/queries`);
      return part;
    }),
  );
}

// Text → names, for the test-only fault seam (store/test-faults.ts), which sees only the text.
const NAMES = new Map<string, string[]>();
for (const [k, v] of QUERIES) NAMES.set(v, [...(NAMES.get(v) ?? []), k]);

/** The name of a named query's text (the first, if two share it); undefined for other SQL. */
export function queryNameOf(text: string): string | undefined {
  return NAMES.get(text)?.[0];
}

/** Every name of the query `name`'s text: [name] unless another query has the same text; [] if unknown. */
export function queryNamesSharingText(name: string): string[] {
  const text = QUERIES.get(name);
  return text === undefined ? [] : NAMES.get(text)!;
}

export function sql(name: string): string {
  const text = QUERIES.get(name);
  if (!text) throw new Error(`unknown query ${name}: add it to sql/queries`);
  return text;
}
