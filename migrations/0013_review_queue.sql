-- The review queue: one place for every candidate fact that waits for a person or an agent.
--
-- A candidate is a whole fact (the JSON a `POST /v1/facts` takes, redacted under the bank's
-- policy before it lands here) that nothing has stored yet: a successor `verify` proposed
-- because the line a fact quotes changed in a commit (kind 'successor', `source_commit` names it),
-- or a correction an agent chose to queue instead of saving (kind 'correction'). `replaces`:
-- the fact accepting it supersedes (none: accepting it is a plain add).
--
-- Accepting goes through the one write path (a supersede, reason "source changed in
-- <commit>"), and `result_fact` names the fact it stored. A rejected candidate stays, so the
-- same source text is never proposed again for the same fact: `source_key` is the sha256 of
-- the candidate's quote with its whitespace normalised, and a fact holds at most one pending
-- or rejected candidate per key. 'withdrawn': a newer proposal for the same fact replaced it.
CREATE TABLE candidates (
    id           bigserial PRIMARY KEY,
    bank_id      bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('successor', 'correction')),
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'accepted', 'rejected', 'withdrawn')),
    replaces     bigint REFERENCES facts (id) ON DELETE CASCADE,
    fact         jsonb NOT NULL,
    reason       text NOT NULL,
    source_commit text,
    source_key   text NOT NULL,
    member_id    bigint REFERENCES members (id) ON DELETE SET NULL,
    agent        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    decided_at   timestamptz,
    decided_by   bigint REFERENCES members (id) ON DELETE SET NULL,
    decision     text,
    result_fact  bigint REFERENCES facts (id) ON DELETE SET NULL
);
CREATE INDEX candidates_bank_status ON candidates (bank_id, status, id);
CREATE INDEX candidates_replaces ON candidates (replaces) WHERE replaces IS NOT NULL;
CREATE INDEX candidates_result ON candidates (result_fact) WHERE result_fact IS NOT NULL;
CREATE INDEX candidates_member ON candidates (member_id) WHERE member_id IS NOT NULL;
CREATE INDEX candidates_decider ON candidates (decided_by) WHERE decided_by IS NOT NULL;
CREATE UNIQUE INDEX candidates_once ON candidates (bank_id, coalesce(replaces, 0), source_key)
    WHERE status IN ('pending', 'rejected');
