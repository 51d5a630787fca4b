/**
 * One integer carries two counters: failover generation × 2^32 + leader term. An election
 * bumps the term; a region failover bumps the generation, so every token issued after a
 * failover is above every token the old region can still issue against its old database.
 */
export function fencingToken(generation: number, term: number): number {
  return generation * 2 ** 32 + term;
}
