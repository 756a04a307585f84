-- The dashboard: its fact list filters by tag and its health page counts facts
-- created per day; without these both scan every fact of the bank (evals/bench_dashboard.py
-- measures each page at 100k facts).
CREATE INDEX facts_tags ON facts USING gin (tags);
CREATE INDEX facts_bank_created ON facts (bank_id, created_at);
