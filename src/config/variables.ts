// Every environment variable the scheduler reads, one row each: how its value is checked
// (a valibot schema over the raw string), its default (a raw string, checked by that same
// schema, so the documented default is the one in force), which modes read it, and what it
// means. loadConfig (src/config.ts) reads the environment through this table; `--help` and the
// README's Configuration section are rendered from it (src/config/docs.ts; `npm run
// gen:config-docs` rewrites the README, test/unit/config-table.test.ts fails when it is stale).
//
// The rows live in variables/, one file a section of the README's table, in its order.
import { API_AND_AUTH } from "./variables/api.ts";
import { CALLS } from "./variables/calls.ts";
import { DISPATCH } from "./variables/dispatch.ts";
import { FLOW_CONTROL } from "./variables/flow.ts";
import { REDIS_INDEX } from "./variables/redis-index.ts";
import { REGIONS } from "./variables/regions.ts";
import { RETENTION } from "./variables/retention.ts";
import { STORAGE } from "./variables/storage.ts";
import { TEST_ONLY } from "./variables/test-only.ts";

export { SECTIONS, type Section, type ServerMode, type Variable } from "./variable.ts";
export { MIN_TOKEN_CHARS } from "./variables/api.ts";
export { MIN_SIGNING_KEY_BYTES } from "./variables/calls.ts";
export { TENANT_SHARE_WITH_TENANTS } from "./variables/flow.ts";

export const VARIABLES = {
  ...STORAGE,
  ...API_AND_AUTH,
  ...CALLS,
  ...DISPATCH,
  ...FLOW_CONTROL,
  ...RETENTION,
  ...REGIONS,
  ...REDIS_INDEX,
  ...TEST_ONLY,
};

export type VariableName = keyof typeof VARIABLES;
export const VARIABLE_NAMES = Object.keys(VARIABLES) as VariableName[];

/**
 * SCHEDULER_* names that are not the server's but share its environment, so start-up lets
 * them be: the CLI's own (`scheduler status`, `scheduler jobs …`), the test suite's and the
 * benches' switches (bench/lib/scheduler-process.ts and scripts/with-services.sh pass
 * environments along).
 */
export const OTHER_PROGRAMS: Record<string, string> = {
  SCHEDULER_URL: "the CLI's scheduler address",
  SCHEDULER_TOKEN: "the CLI's bearer token",
  SCHEDULER_LONG_TESTS: "the test suite's long forms",
};
export const OTHER_PROGRAMS_PREFIX = "SCHEDULER_BENCH_";
