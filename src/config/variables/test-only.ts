// The variables of the section "Test only (never in production)" (switches for tests, never for production): see ../variables.ts.
import * as v from "valibot";
import { parseTestFaults } from "../../store/test-faults.ts";
import { parsedBy } from "../schemas.ts";
import type { Variable } from "../variable.ts";

export const TEST_ONLY = {
  SCHEDULER_TEST_CLOCK_OFFSET_MS: {
    schema: v.pipe(v.string(), v.regex(/^-?\d{1,10}$/, "must be a whole number of milliseconds, like -20000 or 20000"), v.transform(Number)),
    default: "0",
    section: "Test only (never in production)",
    readBy: "all",
    doc: "shifts this process's wall clock (`Date.now()`, `new Date()`) by this many ms",
    more: ", as on a host whose clock is off; warned about at start",
  },
  SCHEDULER_TEST_FAULTS: {
    schema: parsedBy(parseTestFaults),
    quiet: true,
    section: "Test only (never in production)",
    readBy: "all",
    doc: "`Name=SQLSTATE@probability,…`: named queries fail now and then",
    more: ", e.g. `ExpireCoalesced=40P01@0.2,CompleteAttempts=55P03@0.05`: before the named query (`-- name:` in `sql/queries`) runs, with that probability the server raises that SQLSTATE on the same connection, as a real deadlock or lock timeout would; counted in `scheduler_test_faults_injected_total{query,code}`, warned about at start",
  },
  SCHEDULER_TEST_FAULTS_ARMED: {
    schema: v.pipe(
      v.picklist(["0", "1"], "must be 0 or 1"),
      v.transform((s) => s !== "0"),
    ),
    default: "1",
    emptyIsSet: true,
    section: "Test only (never in production)",
    readBy: "all",
    doc: "with `SCHEDULER_TEST_FAULTS`: `0` starts them disarmed; `SIGUSR2` toggles them",
    more: " in the running process (logged), so a test makes one process's queries fail for a while without restarting it",
  },
} as const satisfies Record<string, Variable>;
