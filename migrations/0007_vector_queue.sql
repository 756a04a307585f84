-- Facts whose vectors are pending (import speed): an import with `vectors=queue`
-- commits its facts (rows, BM25 postings, events, audit) without waiting for the embedder, and
-- queues them here. The ingest service's embedder worker drains the queue in bounded batches:
-- it embeds a fact's passages (its content + tags, then each writer question), writes
-- `facts.embedding` and `fact_vectors`, and deletes the queue row in the same transaction, so
-- a worker that dies mid-batch loses nothing (the rows are still here at the next start).
--
-- A queued fact is found by the lexical leg at once (it is indexed when it is stored) and by
-- the dense leg once its vectors land. One row per fact: the passages are read from the fact
-- itself when the worker takes it, so an edit made meanwhile is embedded as it stands.
CREATE TABLE vector_queue (
    fact_id   bigint PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    bank_id   bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    queued_at timestamptz NOT NULL DEFAULT now(),
    -- Failed embedding attempts (the worker skips a row after MAX_ATTEMPTS; counted).
    attempts  integer NOT NULL DEFAULT 0
);
CREATE INDEX vector_queue_bank ON vector_queue (bank_id);
CREATE INDEX vector_queue_order ON vector_queue (attempts, queued_at, fact_id);
