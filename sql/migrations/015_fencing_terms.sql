-- Fencing terms (issue 14, hole 3). The term, the low half of every fencing token
-- (generation × 2^32 + term), is the epoch of a dispatch shard lease. Every acquisition takes
-- it from this one sequence: atomically (two acquisitions from the same snapshot never share
-- an epoch), and never reset (a region failover bumps the generation and leaves it alone), so
-- an epoch taken after any sequence of failovers, handoffs and restarts is above every epoch
-- handed out before it in this database. A process therefore cannot keep an epoch that a
-- later holder's is below. Capped below 2^32: a term never spills into the generation half.
CREATE SEQUENCE dispatch_term AS bigint MINVALUE 1 MAXVALUE 4294967295 NO CYCLE;
-- Above every epoch a dispatch lease has now.
SELECT setval('dispatch_term', (SELECT coalesce(max(epoch), 0) + 1 FROM leases WHERE name LIKE 'dispatch%'), false);
