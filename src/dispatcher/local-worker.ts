import type { ClaimRow } from "../store/types.ts";

// The hand-off between a dispatcher and the worker in its process: the one crossing of a
// job's path from claim to call (README "How it works"). Its own file, so that neither side
// imports the other.

/** The room a worker in this process gives one claim (LocalWorker.fill). */
export interface LocalRoom {
  /** Jobs of any priority the claim may take. */
  any: number;
  /** Jobs of the reserved class only (SCHEDULER_RESERVED_SLOTS), beyond `any`. */
  reserved: number;
  /** How many it may start: open their attempts, the claim being their pre-call check (ClaimDueIds). */
  startLimit: number;
  /** Take only what starts at once (startLimit), not a prefetch. */
  onlyWhatStarts: boolean;
}

/**
 * A worker in this process, as its dispatcher sees it: one call a claim. fill() gives the
 * claim the worker's room (or runs nothing and answers undefined, when a claim now would not
 * be worth its statements), takes each batch the claim hands it, and takes its room back
 * when the claim ends. Returns the jobs it took.
 */
export interface LocalWorker {
  readonly owner: string;
  fill(max: number, claim: (room: LocalRoom, hand: (jobs: ClaimRow[], roundTripMs: number) => void) => Promise<void>): Promise<ClaimRow[] | undefined>;
}
