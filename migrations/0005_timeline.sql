-- The timeline: what just happened in a project, per bank. Sessions, file touches,
-- commands, session start/end, handoffs and conflicts. These rows are never facts: nothing
-- here is recalled, embedded or injected as a fact (docs/principles.md#write-gate). Every text is redacted before
-- it is stored (factbank.timeline). Rows older than FACTBANK_TIMELINE_RETENTION_DAYS are
-- removed by `timeline.cleanup`.

-- One agent session, keyed by the harness's own session id within a bank. `project` is the
-- project key (normalised git remote), `cwd` the working directory relative to the repo root.
CREATE TABLE timeline_sessions (
    id          bigserial PRIMARY KEY,
    bank_id     bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    session_key text NOT NULL,
    project     text,
    agent       text NOT NULL DEFAULT '',
    member_id   bigint REFERENCES members (id) ON DELETE SET NULL,
    member      text NOT NULL DEFAULT '',
    machine     text NOT NULL DEFAULT '',
    branch      text NOT NULL DEFAULT '',
    cwd         text NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz,
    last_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (bank_id, session_key)
);
CREATE INDEX timeline_sessions_project ON timeline_sessions (bank_id, project, last_at);
CREATE INDEX timeline_sessions_member ON timeline_sessions (member_id);

-- One thing that happened. `path` is relative to the repo root; a command keeps its exit code.
CREATE TABLE timeline_events (
    id         bigserial PRIMARY KEY,
    bank_id    bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    session_id bigint NOT NULL REFERENCES timeline_sessions (id) ON DELETE CASCADE,
    project    text,
    kind       text NOT NULL CHECK (kind IN ('session_start', 'session_end', 'file', 'command',
                                             'handoff', 'conflict')),
    at         timestamptz NOT NULL DEFAULT now(),
    agent      text NOT NULL DEFAULT '',
    member     text NOT NULL DEFAULT '',
    machine    text NOT NULL DEFAULT '',
    branch     text NOT NULL DEFAULT '',
    path       text,
    tool       text,
    command    text,
    exit_code  integer,
    detail     text
);
CREATE INDEX timeline_events_project_at ON timeline_events (bank_id, project, at);
CREATE INDEX timeline_events_file ON timeline_events (bank_id, project, path, at)
    WHERE kind = 'file';
CREATE INDEX timeline_events_session ON timeline_events (session_id);

-- A note for the next session in a project (any, or one named agent and/or member). Delivered
-- once: the first session start that matches takes it and marks it.
CREATE TABLE handoffs (
    id                   bigserial PRIMARY KEY,
    bank_id              bigint NOT NULL REFERENCES banks (id) ON DELETE CASCADE,
    project              text,
    text                 text NOT NULL,
    author_member        text NOT NULL DEFAULT '',
    author_agent         text NOT NULL DEFAULT '',
    author_session       text,
    to_agent             text,
    to_member            text,
    files                text[] NOT NULL DEFAULT '{}',
    fact_ids             bigint[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    delivered_at         timestamptz,
    delivered_to_session text
);
CREATE INDEX handoffs_open ON handoffs (bank_id, project, created_at) WHERE delivered_at IS NULL;
CREATE INDEX handoffs_created ON handoffs (bank_id, created_at);
