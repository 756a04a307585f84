-- The dense leg's indexes: one HNSW graph per language group, over half-precision vectors,
-- and one over the facts' own vectors for the near-duplicate checks.
--
-- Until now one graph held every vector (fact_vectors_embedding), and recall's two scans per
-- query (Chinese, and the rest: search._DENSE_SQL) were both *filtered* scans of it: each
-- walked the whole graph's neighbourhoods and threw away the other group's half, and a bank
-- with no vector of a group walked until hnsw.max_scan_tuples on every query. At 100k facts
-- x 5 vectors ef_search 400 found 0.727 of the exact top 10 (evals/reports/2026-12-02/
-- ann_recall_100k.md). A partial index per group (WHERE lang = 'zh' / lang <> 'zh') matches
-- the scan's own condition, so nothing is filtered but the bank. The graphs index
-- embedding::halfvec(384): half the bytes per distance and per page, a faster build; the
-- stored vectors stay float32 and the dense leg re-ranks its candidates by their exact cosine,
-- so the cosines it returns are unchanged (measurements: evals/reports/2026-12-05/
-- ann_recall.md).
--
-- The near-duplicate checks (write gate, duplicates_of, misses) read ord 0 only: their own
-- partial graph of one vector a fact, full precision, matching `ord = 0` in their SQL.
--
-- The build: the graph in memory (maintenance_work_mem; past it pgvector builds several
-- times slower: about 1.2 KiB a vector, 300 MiB for a group of 250k) and parallel workers
-- (capped by max_worker_processes). At least 1 GB and 2 workers for this transaction; an
-- operator's larger session values (PGOPTIONS, ops/README.md) are kept.
SELECT set_config('maintenance_work_mem', '1GB', true)
 WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB');
SELECT set_config('max_parallel_maintenance_workers', '2', true)
 WHERE current_setting('max_parallel_maintenance_workers')::int < 2;

DROP INDEX IF EXISTS fact_vectors_embedding;
CREATE INDEX fact_vectors_own ON fact_vectors USING hnsw (embedding vector_cosine_ops)
    WHERE ord = 0;
-- pgvector's default build parameters (m 16, ef_construction 64): at 10k facts ef_construction
-- 32 lost 3 points of the exact top 10, m 8 with ef_construction 32 lost 10 (ops/README.md).
CREATE INDEX fact_vectors_zh ON fact_vectors
    USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WHERE lang = 'zh';
CREATE INDEX fact_vectors_rest ON fact_vectors
    USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WHERE lang <> 'zh';
