-- Claims on the vector queue, so several embedder workers (ingest copies, or `factbank serve
-- worker` on other machines) drain one queue without embedding a fact twice.
--
-- A worker claims a round's rows in one statement (SELECT ... FOR UPDATE SKIP LOCKED, then
-- UPDATE ... SET claimed_by, claimed_until): another worker skips rows whose claim has not
-- expired. The claim is a lease, not a lock held across the embedding: a worker that dies
-- (SIGKILL, a lost machine) leaves rows that any worker takes again once `claimed_until`
-- passes. The final guard stays where it was: the transaction that stores a fact's vectors
-- deletes its queue row (DELETE ... RETURNING), so even an expired-and-retaken claim stores
-- one set of vectors.
ALTER TABLE vector_queue
    ADD COLUMN claimed_by    text,
    ADD COLUMN claimed_until timestamptz;
