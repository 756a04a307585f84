-- Miss counting (docs/misses.md): how often a bank is told what it already held, and whether
-- the session that told it had been shown the fact. Three logs, all keyed by the harness's
-- session id (sent as X-Factbank-Session by hooks, MCP and the CLI inside a session):
--
-- fact_exposures: the inject log made durable. A fact injected into a session (session and
-- prompt blocks, not previews) or returned to a search made in it. The Redis set of facts a
-- session has seen expires after a day and is gone when Redis restarts: it cannot answer a
-- question asked of last month.
CREATE TABLE fact_exposures (
    bank_id     bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    session_key text NOT NULL,
    fact_id     bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    via         text NOT NULL CHECK (via IN ('inject', 'search')),
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, session_key, fact_id, via)
);
CREATE INDEX fact_exposures_fact ON fact_exposures (fact_id);

-- A correction the prompt hook recognised in a user's prompt (the nudge), with the fact it
-- named as the one to supersede (the prompt's top hit; none when the bank had nothing).
CREATE TABLE correction_nudges (
    id          bigserial PRIMARY KEY,
    bank_id     bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    session_key text NOT NULL,
    fact_id     bigint REFERENCES facts (id) ON DELETE SET NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX correction_nudges_session ON correction_nudges (bank_id, session_key, at);
CREATE INDEX correction_nudges_at ON correction_nudges (bank_id, at);
CREATE INDEX correction_nudges_fact ON correction_nudges (fact_id);

-- Every write made in a session (stored, reinforced, superseded): which fact it left, and
-- whether a correction had been recognised in that session before it ("saved after a nudge").
CREATE TABLE session_writes (
    id          bigserial PRIMARY KEY,
    bank_id     bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    session_key text NOT NULL,
    fact_id     bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    action      text NOT NULL CHECK (action IN ('stored', 'reinforced', 'superseded')),
    nudged      boolean NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_writes_fact ON session_writes (fact_id);
CREATE INDEX session_writes_at ON session_writes (bank_id, at);

-- A repeat: a write whose claim the bank already held when it was written. `kind`: the same
-- claim (a reinforce), a correction of an existing fact (a supersede), a fact stored although
-- an equivalent one existed (the same claim by meaning, filed under another category or
-- project, so the reinforce path did not see it), or a claim the bank had retired. `fact_id` is the
-- fact the bank held, `new_fact_id` what the write stored (none for a reinforce or a retired
-- claim). `shown`: whether that fact was injected into the writing session, found by a search
-- in it, or never shown ('unknown': the write named no session). `repeated_correction`: the
-- held fact was itself a correction (a supersede's successor, or saved after a nudge) and this
-- write corrects again (a supersede, or after a nudge): the user had to say it twice.
CREATE TABLE repeats (
    id                  bigserial PRIMARY KEY,
    bank_id             bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    kind                text NOT NULL CHECK (kind IN ('same', 'correction', 'equivalent', 'retired')),
    fact_id             bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    new_fact_id         bigint REFERENCES facts (id) ON DELETE CASCADE,
    session_key         text,
    project             text,
    member_id           bigint REFERENCES members (id) ON DELETE SET NULL,
    agent               text NOT NULL DEFAULT '',
    shown               text NOT NULL CHECK (shown IN ('injected', 'searched', 'never', 'unknown')),
    nudged              boolean NOT NULL DEFAULT false,
    nudged_fact         boolean NOT NULL DEFAULT false,
    repeated_correction boolean NOT NULL DEFAULT false,
    at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX repeats_bank_at ON repeats (bank_id, at);
CREATE INDEX repeats_fact ON repeats (fact_id);
CREATE INDEX repeats_new_fact ON repeats (new_fact_id);
CREATE INDEX repeats_member ON repeats (member_id);
