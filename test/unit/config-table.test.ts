// The table of environment variables (src/config/variables.ts): every problem reported at once,
// unknown SCHEDULER_* names refused with the nearest known one, and --help and the README
// rendered from the table and in step with it.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { helpEnvironment, withReadmeConfiguration } from "../../src/config/docs.ts";
import { nearest } from "../../src/config/nearest.ts";
import { defaultOf } from "../../src/config/read-env.ts";
import { OTHER_PROGRAMS, OTHER_PROGRAMS_PREFIX, SECTIONS, VARIABLE_NAMES, VARIABLES } from "../../src/config/variables.ts";
import { API_AND_AUTH } from "../../src/config/variables/api.ts";
import { CALLS } from "../../src/config/variables/calls.ts";
import { DISPATCH } from "../../src/config/variables/dispatch.ts";
import { FLOW_CONTROL } from "../../src/config/variables/flow.ts";
import { REDIS_INDEX } from "../../src/config/variables/redis-index.ts";
import { REGIONS } from "../../src/config/variables/regions.ts";
import { RETENTION } from "../../src/config/variables/retention.ts";
import { STORAGE } from "../../src/config/variables/storage.ts";
import { TEST_ONLY } from "../../src/config/variables/test-only.ts";

const ROOT = join(import.meta.dir, "..", "..");

function problemsOf(env: Record<string, string>, flags = {}): string[] {
  try {
    loadConfig(env, flags);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
}

test("each section's file holds its section's rows only, the files in the order of SECTIONS, no name twice", () => {
  const files = [STORAGE, API_AND_AUTH, CALLS, DISPATCH, FLOW_CONTROL, RETENTION, REGIONS, REDIS_INDEX, TEST_ONLY];
  expect(files.map((f) => [...new Set(Object.values(f).map((r) => r.section))])).toEqual(SECTIONS.map((s) => [s]));
  expect(files.reduce((n, f) => n + Object.keys(f).length, 0)).toBe(VARIABLE_NAMES.length);
});

describe("every problem at once", () => {
  test("each bad variable is one line naming it, in one error", () => {
    const problems = problemsOf(
      { PORT: "http", WORKER_CONCURRENCY: "0", SCHEDULER_LEASE_TTL: "soon", LOG_LEVEL: "loud", SCHEDULER_TENANT_QUOTAS: "vip:schedules=0" },
      { mode: "everything" },
    );
    expect(problems).toHaveLength(6);
    for (const [i, name] of ["--mode", "PORT", "LOG_LEVEL", "SCHEDULER_TENANT_QUOTAS", "WORKER_CONCURRENCY", "SCHEDULER_LEASE_TTL"].entries()) {
      expect(problems.some((p) => p.startsWith(`${name} `))).toBe(true);
      expect(problems[i]).not.toContain("\n");
    }
    expect(problems).toContain('WORKER_CONCURRENCY must be at least 1 (got "0")');
    // The message is the lines, one per problem.
    expect(() => loadConfig({ PORT: "http", WORKER_CONCURRENCY: "0" })).toThrow(/^PORT .*\nWORKER_CONCURRENCY /);
  });

  test("a rule across variables is checked too, and says nothing about a variable already refused", () => {
    expect(problemsOf({ SCHEDULER_CLIENT_IP_HEADER: "fly-client-ip", SCHEDULER_RESERVED_SLOTS: "100:1", SCHEDULER_PRESTAGE: "2m" })).toEqual([
      'SCHEDULER_PRESTAGE must be at most 60s: claimed jobs wait in workers\' memory until due (got "2m")',
      'SCHEDULER_RESERVED_SLOTS must reserve at least 1 and fewer than WORKER_CONCURRENCY (100) slots (got "100:1")',
      "SCHEDULER_CLIENT_IP_HEADER needs SCHEDULER_TRUSTED_PROXIES (the addresses of the proxies that set it): from anyone else the header is a name the client picks",
    ]);
    // WORKER_CONCURRENCY refused: the reserved-slots rule, which needs it, is not checked.
    expect(problemsOf({ WORKER_CONCURRENCY: "many", SCHEDULER_RESERVED_SLOTS: "100:1" })).toEqual([
      'WORKER_CONCURRENCY must be a whole number from 1 to 10000 (got "many")',
    ]);
    expect(problemsOf({ SCHEDULER_TEST_FAULTS_ARMED: "no" })).toEqual(['SCHEDULER_TEST_FAULTS_ARMED must be 0 or 1 (got "no")']);
  });

  test("no secret in any line, however many problems there are", () => {
    const token = "t".repeat(31);
    const secret = `whsec_${Buffer.alloc(23, 9).toString("base64")}`;
    const problems = problemsOf({
      SCHEDULER_TOKENS: `${token}:acme:jobs:read`,
      SCHEDULER_SIGNING_SECRET: secret,
      DATABASE_URL: "mysql://app:hunter2@db/x",
      UPSTASH_REDIS_REST_URL: "https://u:hunter3@ bad",
      UPSTASH_REDIS_REST_TOKEN: "tok-hunter4",
      SCHEDULER_SIGNING_SECRETS: "whsec_hunter5",
    });
    expect(problems.length).toBeGreaterThanOrEqual(5);
    const text = problems.join("\n");
    for (const s of [token, secret.slice(6), "hunter2", "hunter3", "hunter4", "hunter5"]) expect(text).not.toContain(s);
  });

  test("a flag replaces its variable, which is then not read (as before the table)", () => {
    expect(loadConfig({ PORT: "not-a-port" }, { port: "9000" }).port).toBe(9000);
    expect(loadConfig({ REGION: "NOT A REGION" }, { region: "fra" }).region).toBe("fra");
    expect(problemsOf({ FLY_REGION: "Bad Region" })).toEqual([
      `FLY_REGION must be a region name like iad or local (got "Bad Region"); set REGION to name this process's region`,
    ]);
  });
});

describe("unknown SCHEDULER_* variables", () => {
  test("refused with the nearest valid name, the value not shown", () => {
    expect(problemsOf({ SCHEDULER_POLL_INTERVALL: "1s" })).toEqual([
      "SCHEDULER_POLL_INTERVALL is not a setting of the scheduler: did you mean SCHEDULER_POLL_INTERVAL? (rename or unset it; scheduler --help lists every variable)",
    ]);
    expect(problemsOf({ SCHEDULER_POLL_INTERAVL: "1s" })[0]).toContain("did you mean SCHEDULER_POLL_INTERVAL?");
    expect(problemsOf({ SCHEDULER_SIGNING_SECRETS: "whsec_hunter2" })[0]).toContain("did you mean SCHEDULER_SIGNING_SECRET?");
    expect(problemsOf({ SCHEDULER_WORKER_CONCURRENCY: "10" })[0]).toContain("did you mean WORKER_CONCURRENCY?");
    expect(problemsOf({ SCHEDULER_TENANT_QUOTA: "a:rate=1" })[0]).toContain("did you mean SCHEDULER_TENANT_QUOTAS?");
    expect(problemsOf({ SCHEDULER_FOO: "" })[0]).toStartWith("SCHEDULER_FOO is not a setting");
  });

  test("the CLI's, the tests' and the benches' own names are let be; other prefixes are not ours to judge", () => {
    const c = loadConfig({
      SCHEDULER_URL: "http://x",
      SCHEDULER_TOKEN: "t",
      SCHEDULER_LONG_TESTS: "1",
      SCHEDULER_BENCH_FAST: "1",
      SCHEDULER_BENCH_BUN_ARGS: "--smol",
      FLY_APP_NAME: "x",
      SCHEDULERX: "1",
    });
    expect(c.port).toBe(8080);
  });

  test("every SCHEDULER_* name in the repository is in the table or let be", () => {
    const files = Bun.spawnSync(["git", "ls-files", "--cached", "--others", "--exclude-standard"], { cwd: ROOT })
      .stdout.toString()
      .split("\n")
      .filter((f) => /\.(ts|md|sh|toml|json|yml|yaml)$|Dockerfile$/.test(f));
    expect(files.length).toBeGreaterThan(100);
    // The drill's settings object (a name in code), and the misspellings the tests and comments make on purpose.
    const notVariables = new Set([
      "SCHEDULER_ENV",
      "SCHEDULER_POLL_INTERVALL",
      "SCHEDULER_POLL_INTERAVL",
      "SCHEDULER_SIGNING_SECRETS",
      "SCHEDULER_WORKER_CONCURRENCY",
      "SCHEDULER_TENANT_QUOTA",
      "SCHEDULER_FOO",
      "SCHEDULER_AGNIG",
      "SCHEDULER_AGENT",
    ]);
    const unknown = new Set<string>();
    for (const f of files) {
      for (const [name] of readFileSync(join(ROOT, f), "utf8").matchAll(/\bSCHEDULER_[A-Z0-9_]*[A-Z0-9]\b/g)) {
        if (notVariables.has(name) || Object.hasOwn(VARIABLES, name) || Object.hasOwn(OTHER_PROGRAMS, name) || name.startsWith(OTHER_PROGRAMS_PREFIX)) continue;
        unknown.add(`${name} (${f})`);
      }
    }
    expect([...unknown]).toEqual([]);
  });

  test("nearest counts a swap of neighbours as one edit", () => {
    expect(nearest("SCHEDULER_AGNIG", ["SCHEDULER_AGING", "SCHEDULER_AGENT"])).toBe("SCHEDULER_AGING");
    expect(nearest("PORTS", ["HOST", "PORT"])).toBe("PORT");
  });
});

describe("the table", () => {
  test("every default is accepted by its own schema; docs are one short line", () => {
    for (const name of VARIABLE_NAMES) {
      expect(() => defaultOf(name)).not.toThrow();
      const row = VARIABLES[name] as { doc: string; default?: string; shownDefault?: string };
      expect(row.doc).not.toContain("\n");
      expect(row.doc).not.toContain("](");
      expect(row.doc.length).toBeLessThanOrEqual(90);
      expect(row.default !== undefined && row.shownDefault !== undefined).toBe(false);
    }
  });

  test("the defaults in force are the documented ones", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      host: "0.0.0.0",
      dataDir: "./data",
      region: "local",
      homeRegion: "local",
      workerConcurrency: 100,
      workerPrefetch: 512,
      maxBodyBytes: 10 * 1024 * 1024,
      payloadInlineMax: 64 * 1024,
      leaseTtlMs: 30_000,
      prestageMs: 0,
      shards: 16,
      testFaultsArmed: true,
      retention: { succeededMs: 7 * 86_400_000, deadMs: 30 * 86_400_000, auditMs: null, payloadGraceMs: 3_600_000 },
      flow: { weights: { high: 8, normal: 3, low: 1 }, agingMs: 60_000 },
    });
  });

  test("the README's Configuration section is the one the table gives (npm run gen:config-docs)", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(withReadmeConfiguration(readme)).toBe(readme);
    for (const name of VARIABLE_NAMES) expect(readme).toContain(`| \`${name}\` |`);
  });

  test("scheduler --help lists every variable with its default", () => {
    const r = Bun.spawnSync([process.execPath, join(ROOT, "src", "main.ts"), "--help"], { env: { PATH: process.env.PATH ?? "" } });
    expect(r.exitCode).toBe(0);
    const out = r.stdout.toString();
    expect(out).toContain(helpEnvironment());
    for (const name of VARIABLE_NAMES) {
      const d = (VARIABLES[name] as { default?: string }).default;
      expect(out).toContain(d === undefined ? `    ${name} ` : `    ${name}=${d} `);
    }
  });
});
