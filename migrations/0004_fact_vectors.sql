-- Every vector of a fact in one table, so the dense leg scores a fact by its best vector.
--
-- ord 0 is the fact itself (content + tags, as facts.embedding, which near-duplicate checks
-- keep using); ord 1..n are the questions its writer gave (MISSION docs/principles.md#the-writer-asks-the-questions: two to four
-- short questions in English and Chinese that a later teammate would ask). The question texts
-- live on the fact (redacted like every field, exported, re-embedded from there).
--
-- `lang` is the language of the vector's own text (zh, en or mixed): the dense leg takes its
-- candidates per language, because in a bank that mixes zh and en facts a query's own
-- language otherwise fills every candidate slot (measured on a mixed XQuAD-R dev bank: zh->en
-- R@5 0.38 with one candidate list for both languages, 0.82 with one list per language).
ALTER TABLE facts ADD COLUMN questions text[] NOT NULL DEFAULT '{}';

CREATE TABLE fact_vectors (
    fact_id   bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    bank_id   bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    ord       smallint NOT NULL CHECK (ord >= 0),
    lang      text NOT NULL CHECK (lang IN ('zh', 'en', 'mixed')),
    embedding vector(384) NOT NULL,
    PRIMARY KEY (fact_id, ord)
);
CREATE INDEX fact_vectors_bank_lang ON fact_vectors (bank_id, lang);

-- Existing facts: their own vector, with the language the tokenizer would give their content
-- (factbank.tokenizer.language: CJK characters against Latin words, >= 80% zh, <= 20% en).
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
WHERE f.embedding IS NOT NULL AND f.status <> 'deleted';

CREATE INDEX fact_vectors_embedding ON fact_vectors USING hnsw (embedding vector_cosine_ops);
