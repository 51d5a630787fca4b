/**
 * Injected statement errors that region a's dispatchers and workers carry from their start,
 * disarmed (SCHEDULER_TEST_FAULTS_ARMED=0); a fault arms them with SIGUSR2 for a while and
 * disarms them again, without restarting the process (a restart would end its calls, and
 * hand its leases over cleanly, which is not the case to test).
 */
import type { Mode } from "./processes.ts";

export const SWITCHED_FAULTS: Partial<Record<Mode, string>> = {
  // sql-errors-generation: transient errors in the generator's statements.
  dispatcher: "AdvanceSchedule=40P01@0.3,ActiveOccurrences=55P03@0.3,ExpireCoalesced=40P01@0.3,InsertJobs=40P01@0.2",
  // renewals-fail: every lease renewal and every completion of one worker fails (a broken
  // connection, 08006) while its calls run on.
  worker: "RenewLeases=08006@1,CompleteAttempts=08006@1",
};

/** The environment that gives a process of `mode` its switched faults, disarmed; none if the checkout lacks the switch. */
export function switchedFaultsEnv(mode: Mode, haveSwitch: boolean): Record<string, string> {
  const spec = SWITCHED_FAULTS[mode];
  return spec && haveSwitch ? { SCHEDULER_TEST_FAULTS: spec, SCHEDULER_TEST_FAULTS_ARMED: "0" } : {};
}
