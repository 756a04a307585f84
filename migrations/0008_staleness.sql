-- Sources change, facts follow: fingerprints, staleness, derived facts and their
-- review flags, and the confirm event's project and remotes (the rule-promotion gate).
--
-- The server never reads agents' files. The client that had the file sends a fingerprint of
-- the quoted region with the fact (`fingerprint`: path, line, lines, quote_sha256, file_blob,
-- commit, dirty; JSON because only the client interprets it) and later its verdict on it
-- (`POST /v1/facts/verify`). A stale fact keeps its trust (staleness is not a judgement of the
-- claim): status 'stale', why (`stale_reason`), the new text around the old line
-- (`stale_context`), and since when. `verified_at`: the last time a verify found the source
-- still saying what the fact quotes.
ALTER TABLE facts
    ADD COLUMN fingerprint   jsonb,
    ADD COLUMN verified_at   timestamptz,
    ADD COLUMN stale_reason  text,
    ADD COLUMN stale_context text,
    ADD COLUMN stale_since   timestamptz,
    -- A derived fact is flagged for review when a fact it cites, directly or transitively, is
    -- superseded, turns stale or is deleted. The cause is a fact id, kept as a plain number:
    -- a purged cause is still named in the flag.
    ADD COLUMN review_reason text,
    ADD COLUMN review_cause  bigint,
    ADD COLUMN review_since  timestamptz;

-- Source kind 'fact': a derived fact cites other facts of its bank (`source.location` lists
-- them, "#12, #15"; the quote is verbatim from one of them).
ALTER TABLE facts DROP CONSTRAINT facts_source_kind_check;
ALTER TABLE facts ADD CONSTRAINT facts_source_kind_check
    CHECK (source_kind IN ('file', 'url', 'commit', 'command', 'user', 'doc', 'fact'));

-- Which facts a derived fact cites: the review cascade walks it from the cited side.
CREATE TABLE fact_citations (
    fact_id bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    cites   bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    bank_id bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    PRIMARY KEY (fact_id, cites)
);
CREATE INDEX fact_citations_cites ON fact_citations (cites);
CREATE INDEX fact_citations_bank ON fact_citations (bank_id);

-- The session block names what turned stale (or was flagged) since the caller's last session
-- in the project: an index lookup, never a pass over the bank.
CREATE INDEX facts_stale_since ON facts (bank_id, project, stale_since)
    WHERE stale_since IS NOT NULL;
CREATE INDEX facts_review_since ON facts (bank_id, project, review_since)
    WHERE review_since IS NOT NULL;

-- A confirm records where it was made: the caller's project key and its repository's
-- normalised remotes. The rule gate counts a fact as held in two projects only when their
-- keys differ and their remote sets share nothing.
ALTER TABLE fact_events
    ADD COLUMN project text,
    ADD COLUMN remotes text[] NOT NULL DEFAULT '{}';
CREATE INDEX fact_events_judgements ON fact_events (bank_id, kind, fact_id)
    WHERE kind IN ('confirmed', 'disputed');
