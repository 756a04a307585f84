-- One stored vector per passage, and one HNSW index.
--
-- Since 0004 a fact's own vector (content + tags) was stored twice: in facts.embedding, which
-- the near-duplicate checks scanned through their own HNSW index (facts_embedding), and as
-- fact_vectors ord 0, which recall scans. Two copies to write, two HNSW graphs to build and to
-- keep in memory; at 100k facts x 5 vectors the second graph was a fifth more index for no
-- answer the first could not give. From here on fact_vectors is the only vector store: the
-- near-duplicate checks read ord 0 through fact_vectors_embedding, joined to the fact.
--
-- A deleted fact has no vectors (a delete removes them, as before): a deleted claim added
-- again is still recognised by its normalised text (content_hash), no longer by meaning.
--
-- Any fact whose own vector is only in facts.embedding gets its ord-0 row first (every write
-- path since 0004 writes both, so this is normally nothing), with the language 0004 gave it.
INSERT INTO fact_vectors (fact_id, bank_id, ord, lang, embedding)
SELECT f.id, f.bank_id, 0,
       CASE WHEN s.cjk + s.latin = 0 THEN 'mixed'
            WHEN s.cjk >= 0.8 * (s.cjk + s.latin) THEN 'zh'
            WHEN s.cjk <= 0.2 * (s.cjk + s.latin) THEN 'en'
            ELSE 'mixed' END,
       f.embedding
FROM facts f
CROSS JOIN LATERAL (
    SELECT length(regexp_replace(f.content, '[^\u3400-\u9fff\uf900-\ufaff]', '', 'g')) AS cjk,
           (SELECT count(*) FROM regexp_matches(f.content, '[A-Za-z][A-Za-z0-9_]*', 'g')) AS latin
) s
WHERE f.embedding IS NOT NULL AND f.status <> 'deleted'
  AND NOT EXISTS (SELECT 1 FROM fact_vectors v WHERE v.fact_id = f.id AND v.ord = 0);

DROP INDEX IF EXISTS facts_embedding;
ALTER TABLE facts DROP COLUMN embedding;
