import { parseArgs } from "node:util";
import { readFile } from "node:fs/promises";
import { createClient, type SchedulerClient } from "../client/client.ts";
import { SchedulerApiError, SchedulerNetworkError } from "../client/errors.ts";
import { collect, paginate } from "../client/paginate.ts";
import { details, json, table, type Column, type OutputFormat } from "./format.ts";
import { HELP, RESOURCES } from "./help.ts";

export interface CliIo {
  out: (s: string) => void;
  err: (s: string) => void;
  env: Record<string, string | undefined>;
  readStdin: () => Promise<string>;
}

/** A mistake in the command line: one line on stderr, exit 2. */
class UsageError extends Error {}

const OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
  file: { type: "string", short: "f" },
  target: { type: "string" },
  method: { type: "string" },
  body: { type: "string" },
  "body-text": { type: "string" },
  header: { type: "string", multiple: true },
  delay: { type: "string" },
  "run-at": { type: "string" },
  key: { type: "string" },
  "verify-url": { type: "string" },
  "max-attempts": { type: "string" },
  timeout: { type: "string" },
  tenant: { type: "string" },
  status: { type: "string" },
  schedule: { type: "string" },
  limit: { type: "string" },
  all: { type: "boolean" },
  reason: { type: "string" },
  id: { type: "string" },
  cron: { type: "string" },
  timezone: { type: "string" },
  overlap: { type: "string" },
  misfire: { type: "string" },
  paused: { type: "boolean" },
  count: { type: "string" },
  force: { type: "boolean" },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>["values"];

export const isResourceCommand = (argv: string[]): boolean => RESOURCES.includes(argv[0] ?? "");

/**
 * `scheduler jobs|schedules|dlq VERB …`: the HTTP API through scheduler/client. Returns the
 * exit code: 0 done, 1 the API refused (its code, message and field on stderr) or did not
 * answer, 2 a mistake in the command line.
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [resource, verb, ...rest] = argv;
  try {
    if (verb === undefined || verb === "--help" || verb === "-h" || verb === "help") {
      io.out(HELP[resource]);
      return 0;
    }
    let parsed;
    try {
      parsed = parseArgs({ args: rest, options: OPTIONS, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const { values: v, positionals } = parsed;
    if (v.help) {
      io.out(HELP[resource]);
      return 0;
    }
    const format = (v.output ?? "table") as OutputFormat;
    if (format !== "json" && format !== "table") throw new UsageError(`-o must be json or table, not ${JSON.stringify(v.output)}`);
    const client = createClient({
      baseUrl: v.url ?? io.env.SCHEDULER_URL ?? `http://127.0.0.1:${io.env.PORT ?? 8080}`,
      token: v.token ?? io.env.SCHEDULER_TOKEN,
    });
    const command = COMMANDS[`${resource} ${verb}`];
    if (!command) throw new UsageError(`unknown command "${resource} ${verb}"; see scheduler ${resource} --help`);
    io.out(await command({ client, v, args: positionals, format, io }));
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`scheduler: ${err.message}\n`);
      return 2;
    }
    if (err instanceof SchedulerApiError) {
      io.err(`error: ${err.status} ${err.code}: ${err.message}${err.path ? ` (field: ${err.path})` : ""}\n`);
      return 1;
    }
    if (err instanceof SchedulerNetworkError) {
      io.err(`error: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

interface Ctx {
  client: SchedulerClient;
  v: Values;
  args: string[];
  format: OutputFormat;
  io: CliIo;
}

const one = (args: string[], what: string): string => {
  if (args.length !== 1) throw new UsageError(`give exactly one ${what}`);
  return args[0];
};
const int = (s: string | undefined, flag: string): number | undefined => {
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s)) throw new UsageError(`${flag} must be a whole number`);
  return Number(s);
};
const parseJson = (s: string, flag: string): unknown => {
  try {
    return JSON.parse(s);
  } catch {
    throw new UsageError(`${flag} must be JSON`);
  }
};
async function fromFile(ctx: Ctx): Promise<unknown> {
  const f = ctx.v.file!;
  const textIn =
    f === "-"
      ? await ctx.io.readStdin()
      : await readFile(f, "utf8").catch(() => {
          throw new UsageError(`cannot read ${f}`);
        });
  return parseJson(textIn, `-f ${f}`);
}
function target(v: Values) {
  if (!v.target) throw new UsageError("give --target=URL (or -f FILE with the whole request)");
  const headers: Record<string, string> = {};
  for (const h of v.header ?? []) {
    const i = h.indexOf(":");
    if (i <= 0) throw new UsageError(`--header must be NAME:VALUE, not ${JSON.stringify(h)}`);
    headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
  }
  return {
    url: v.target,
    ...(v.method ? { method: v.method } : {}),
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(v.body !== undefined ? { body: parseJson(v.body, "--body") } : {}),
    ...(v["body-text"] !== undefined ? { body_text: v["body-text"] } : {}),
  };
}

type Job = Awaited<ReturnType<SchedulerClient["jobs"]["get"]>>;
type Schedule = Awaited<ReturnType<SchedulerClient["schedules"]["get"]>>;
type Dead = Awaited<ReturnType<SchedulerClient["dlq"]["list"]>>["items"][number];

const JOB_COLUMNS: Column<Job>[] = [
  { head: "ID", cell: (j) => j.id },
  { head: "STATUS", cell: (j) => j.status },
  { head: "DUE", cell: (j) => j.due_at },
  { head: "ATTEMPTS", cell: (j) => j.attempts },
  { head: "SCHEDULE", cell: (j) => j.schedule_id },
  { head: "TARGET", cell: (j) => `${j.target.method} ${j.target.url}` },
];
const SCHEDULE_COLUMNS: Column<Schedule>[] = [
  { head: "ID", cell: (s) => s.id },
  { head: "CRON", cell: (s) => s.cron },
  { head: "TIMEZONE", cell: (s) => s.timezone },
  { head: "NEXT FIRE", cell: (s) => s.next_fire_local ?? s.next_fire_at },
  { head: "PAUSED", cell: (s) => (s.paused ? "yes" : "no") },
  { head: "TARGET", cell: (s) => s.target.url },
];
const DEAD_COLUMNS: Column<Dead>[] = [
  { head: "ID", cell: (d) => d.id },
  { head: "REASON", cell: (d) => d.dead_reason },
  { head: "DEAD AT", cell: (d) => d.dead_at },
  { head: "REPLAYS", cell: (d) => d.replays },
  { head: "ERROR", cell: (d) => d.last_error },
];

/** A job in a table: its fields, then its attempt log as a table of its own. */
function jobDetails(j: Job): string {
  const { attempt_log, target: t, ...rest } = j;
  let s = details({ ...rest, target: `${t.method} ${t.url}` });
  if (attempt_log?.length) {
    s +=
      "\n" +
      table(attempt_log, [
        { head: "#", cell: (a) => a.number },
        { head: "OUTCOME", cell: (a) => a.outcome },
        { head: "HTTP", cell: (a) => a.http_status },
        { head: "STARTED", cell: (a) => a.started_at },
        { head: "POSSIBLY DELIVERED", cell: (a) => (a.possibly_delivered ? "yes" : "no") },
        { head: "VERIFIED", cell: (a) => (a.verified ? "yes" : "no") },
        { head: "TOKEN", cell: (a) => a.epoch },
        { head: "ERROR", cell: (a) => a.error },
      ]);
  }
  return s;
}

const show = <T>(ctx: Ctx, value: T, asTable: (x: T) => string) => (ctx.format === "json" ? json(value) : asTable(value));
async function listed<T>(ctx: Ctx, page: (cursor?: string) => Promise<{ items: T[]; next_cursor: string | null }>, columns: Column<T>[]): Promise<string> {
  if (ctx.v.all) {
    const items = await collect(paginate(page));
    return ctx.format === "json" ? json(items) : table(items, columns);
  }
  const p = await page();
  if (ctx.format === "json") return json(p);
  return table(p.items, columns) + (p.next_cursor ? `(more: --all, or the API with cursor=${p.next_cursor})\n` : "");
}

const COMMANDS: Record<string, (ctx: Ctx) => Promise<string>> = {
  "jobs create": async (ctx) => {
    const { v } = ctx;
    const body = v.file
      ? await fromFile(ctx)
      : {
          target: target(v),
          ...(v.delay ? { delay: v.delay } : {}),
          ...(v["run-at"] ? { run_at: v["run-at"] } : {}),
          ...(v.key ? { idempotency_key: v.key } : {}),
          ...(v["verify-url"] ? { verify: { url: v["verify-url"] } } : {}),
          ...(v["max-attempts"] ? { retry: { max_attempts: int(v["max-attempts"], "--max-attempts") } } : {}),
          ...(v.timeout ? { timeout: v.timeout } : {}),
          ...(v.tenant ? { tenant: v.tenant } : {}),
        };
    return show(ctx, await ctx.client.jobs.create(body as Parameters<SchedulerClient["jobs"]["create"]>[0]), jobDetails);
  },
  "jobs get": async (ctx) => show(ctx, await ctx.client.jobs.get(one(ctx.args, "job id")), jobDetails),
  "jobs list": (ctx) =>
    listed(
      ctx,
      (cursor) =>
        ctx.client.jobs.list({
          ...(ctx.v.status ? { status: ctx.v.status as never } : {}),
          ...(ctx.v.schedule ? { schedule_id: ctx.v.schedule } : {}),
          ...(ctx.v.tenant ? { tenant: ctx.v.tenant } : {}),
          ...(ctx.v.limit ? { limit: int(ctx.v.limit, "--limit") } : {}),
          ...(cursor ? { cursor } : {}),
        }),
      JOB_COLUMNS,
    ),
  "jobs cancel": async (ctx) => show(ctx, await ctx.client.jobs.cancel(one(ctx.args, "job id"), ctx.v.reason ? { reason: ctx.v.reason } : {}), jobDetails),
  "schedules create": async (ctx) => {
    const { v } = ctx;
    const body = v.file
      ? await fromFile(ctx)
      : (() => {
          if (!v.cron) throw new UsageError("give --cron=EXPR (or -f FILE with the whole request)");
          return {
            ...(v.id ? { id: v.id } : {}),
            cron: v.cron,
            ...(v.timezone ? { timezone: v.timezone } : {}),
            target: target(v),
            ...(v["verify-url"] ? { verify: { url: v["verify-url"] } } : {}),
            ...(v.overlap ? { overlap: v.overlap } : {}),
            ...(v.misfire ? { misfire: v.misfire } : {}),
            ...(v.paused ? { paused: true } : {}),
            ...(v.tenant ? { tenant: v.tenant } : {}),
          };
        })();
    return show(ctx, await ctx.client.schedules.create(body as Parameters<SchedulerClient["schedules"]["create"]>[0]), (s) =>
      details(s as Record<string, unknown>),
    );
  },
  "schedules list": (ctx) =>
    listed(
      ctx,
      (cursor) => ctx.client.schedules.list({ ...(ctx.v.limit ? { limit: int(ctx.v.limit, "--limit") } : {}), ...(cursor ? { cursor } : {}) }),
      SCHEDULE_COLUMNS,
    ),
  "schedules pause": async (ctx) =>
    show(ctx, await ctx.client.schedules.pause(one(ctx.args, "schedule id"), ctx.v.reason), (s) => table([s], SCHEDULE_COLUMNS)),
  "schedules resume": async (ctx) =>
    show(ctx, await ctx.client.schedules.resume(one(ctx.args, "schedule id"), ctx.v.reason), (s) => table([s], SCHEDULE_COLUMNS)),
  "schedules preview": async (ctx) => {
    const n = int(ctx.v.count, "--count") ?? 10;
    return show(ctx, await ctx.client.schedules.preview(one(ctx.args, "schedule id"), n), (p) =>
      table(p, [
        { head: "AT (UTC)", cell: (x) => x.at },
        { head: "LOCAL", cell: (x) => x.local },
      ]),
    );
  },
  "dlq list": (ctx) =>
    listed(
      ctx,
      (cursor) => ctx.client.dlq.list({ ...(ctx.v.limit ? { limit: int(ctx.v.limit, "--limit") } : {}), ...(cursor ? { cursor } : {}) }),
      DEAD_COLUMNS,
    ),
  "dlq replay": async (ctx) => {
    if (!ctx.v.reason) throw new UsageError("give --reason=TEXT (replays are audited)");
    const r = await ctx.client.dlq.replay(one(ctx.args, "job id"), { reason: ctx.v.reason, ...(ctx.v.force ? { force: true } : {}) });
    return show(ctx, r, (x) => details(x as Record<string, unknown>));
  },
};
