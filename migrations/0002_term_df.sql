-- Document frequency per bank and term, kept beside the postings in the fact's transaction.
-- BM25 reads a query term's df with one index lookup instead of counting its postings, and
-- can tell a term found in a large share of the bank (a "common" term, see lexicon.py) from a
-- rare one before touching any posting.
CREATE TABLE term_df (
    bank_id bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    term    text NOT NULL,
    df      integer NOT NULL CHECK (df > 0),
    PRIMARY KEY (bank_id, term)
);

INSERT INTO term_df (bank_id, term, df)
SELECT bank_id, term, count(*) FROM postings GROUP BY bank_id, term;
