-- The whole domain in one schema, so later work adds columns, not redesigns.
CREATE EXTENSION IF NOT EXISTS vector;

-- A bank is the unit of sharing and of isolation: every token is scoped to exactly one.
CREATE TABLE banks (
    id               bigserial PRIMARY KEY,
    name             text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    kind             text NOT NULL CHECK (kind IN ('personal', 'team')),
    redaction_policy text NOT NULL DEFAULT 'redact' CHECK (redaction_policy IN ('redact', 'reject')),
    -- Bumped by every write; recall caches are keyed by it so a write is seen by the next read.
    version          bigint NOT NULL DEFAULT 0,
    -- BM25 corpus statistics, maintained in the same transaction as the postings.
    doc_count        bigint NOT NULL DEFAULT 0,
    total_len        bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
    id         bigserial PRIMARY KEY,
    bank_id    bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (bank_id, name)
);

-- Tokens are shown once and stored only as a SHA-256 hash; the prefix identifies them in lists.
CREATE TABLE tokens (
    id           bigserial PRIMARY KEY,
    bank_id      bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    member_id    bigint NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    prefix       text NOT NULL,
    token_hash   bytea NOT NULL UNIQUE,
    scopes       text[] NOT NULL CHECK (scopes <@ ARRAY['read', 'write', 'admin']::text[] AND cardinality(scopes) > 0),
    label        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    rotated_to   bigint REFERENCES tokens (id)
);
CREATE INDEX tokens_bank ON tokens (bank_id);

-- Defaults copied into every new bank's registry; a bank may add its own categories.
CREATE TABLE default_categories (
    name        text PRIMARY KEY,
    description text NOT NULL,
    auto_inject boolean NOT NULL,
    decays      boolean NOT NULL
);
INSERT INTO default_categories (name, description, auto_inject, decays) VALUES
    ('preferences', 'How the user wants things done: tools, style, conventions they chose.', true, false),
    ('environment', 'Machines, hosts, ports, paths, OS, installed tools and services.', true, true),
    ('project', 'Facts about a project: layout, commands, conventions, aliases.', true, true),
    ('decisions', 'A choice that was made and the reason for it.', false, true),
    ('gotchas', 'An error or trap: symptom, cause and fix.', false, true),
    ('people', 'Who owns or knows what.', false, true),
    ('reference', 'Pointers to docs, dashboards, tickets.', false, true);

CREATE TABLE categories (
    bank_id     bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_-]{0,39}$'),
    description text NOT NULL DEFAULT '',
    auto_inject boolean NOT NULL DEFAULT false,
    decays      boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bank_id, name)
);

CREATE TABLE facts (
    id                bigserial PRIMARY KEY,
    bank_id           bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    content           text NOT NULL,
    category          text NOT NULL,
    tags              text[] NOT NULL DEFAULT '{}',
    source_kind       text NOT NULL CHECK (source_kind IN ('file', 'url', 'commit', 'command', 'user', 'doc')),
    source_location   text NOT NULL DEFAULT '',
    quote             text NOT NULL,
    project           text,
    origin            text NOT NULL CHECK (origin IN ('user', 'verified', 'inferred')),
    tentative         boolean NOT NULL DEFAULT false,
    trust             double precision NOT NULL CHECK (trust >= 0 AND trust <= 1),
    status            text NOT NULL DEFAULT 'active'
                      CHECK (status IN ('active', 'superseded', 'disputed', 'stale', 'deleted')),
    superseded_by     bigint REFERENCES facts (id),
    supersede_reason  text,
    created_by_member bigint NOT NULL REFERENCES members (id),
    created_by_agent  text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- Age decay counts from the last confirmation (or creation), computed at read time.
    confirmed_at      timestamptz NOT NULL DEFAULT now(),
    content_hash      bytea NOT NULL,
    embedding         vector(384),
    embedding_model   text,
    doc_len           integer NOT NULL DEFAULT 0,
    indexed           boolean NOT NULL DEFAULT false,
    FOREIGN KEY (bank_id, category) REFERENCES categories (bank_id, name) ON UPDATE CASCADE
);
CREATE INDEX facts_bank_status ON facts (bank_id, status);
CREATE INDEX facts_bank_hash ON facts (bank_id, content_hash);
CREATE INDEX facts_bank_project ON facts (bank_id, project);
CREATE INDEX facts_embedding ON facts USING hnsw (embedding vector_cosine_ops);

-- Every trust change and lifecycle step of a fact, with who and why.
CREATE TABLE fact_events (
    id           bigserial PRIMARY KEY,
    fact_id      bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    bank_id      bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    kind         text NOT NULL,
    trust_before double precision,
    trust_after  double precision,
    member_id    bigint REFERENCES members (id),
    agent        text NOT NULL DEFAULT '',
    reason       text NOT NULL DEFAULT '',
    related_fact bigint REFERENCES facts (id),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fact_events_fact ON fact_events (fact_id, id);

-- Inverted index for BM25 inside Postgres; ingest writes it in the fact's transaction.
CREATE TABLE postings (
    bank_id bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    term    text NOT NULL,
    fact_id bigint NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    tf      integer NOT NULL CHECK (tf > 0),
    -- The fact's token count, copied here so scoring a posting never touches the facts table.
    doc_len integer NOT NULL,
    PRIMARY KEY (bank_id, term, fact_id)
);
CREATE INDEX postings_fact ON postings (fact_id);

-- Embeddings keyed by model and content hash, so unchanged text is never embedded twice.
CREATE TABLE embedding_cache (
    model        text NOT NULL,
    content_hash bytea NOT NULL,
    embedding    vector NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, content_hash)
);

-- Append-only, hash-chained: each row's hash covers the previous row's hash.
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    bank_id    bigint,
    member_id  bigint,
    token_id   bigint,
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    detail     jsonb NOT NULL DEFAULT '{}',
    prev_hash  bytea NOT NULL,
    hash       bytea NOT NULL UNIQUE
);

CREATE INDEX audit_log_chain ON audit_log (bank_id, id);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
