/** Whether this checkout has the test-only seams (they land on main from other branches). */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export function seams(root = join(import.meta.dir, "..", "..")): { clockOffset: boolean; statementFaults: boolean; faultSwitch: boolean } {
  const config = readFileSync(join(root, "src/config.ts"), "utf8");
  return {
    clockOffset: config.includes("SCHEDULER_TEST_CLOCK_OFFSET_MS"),
    statementFaults: config.includes("SCHEDULER_TEST_FAULTS"),
    faultSwitch: config.includes("SCHEDULER_TEST_FAULTS_ARMED"),
  };
}
