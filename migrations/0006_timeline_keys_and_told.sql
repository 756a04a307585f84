-- The identity of a timeline event (history backfill): the client names each event it
-- derives from a harness's own record (a tool call's id and the event's index within it;
-- `start` / `end` for a session's start and end), so the same event sent twice is stored once.
-- A hook and `factbank import-history` derive the same key for the same tool call, so a
-- backfill after (or before) the hooks ran adds nothing they already recorded, and a second
-- backfill adds nothing at all. Unique within the session row (itself unique per bank and the
-- harness's session id); events without a key (older clients, conflicts, handoffs) are never
-- deduplicated.
ALTER TABLE timeline_events ADD COLUMN key text;
CREATE UNIQUE INDEX timeline_events_key ON timeline_events (session_id, key)
    WHERE key IS NOT NULL;

-- A conflict is told to both sessions: the one editing now learns it from its own
-- hook; the other session, whose earlier touch the edit ran into (`other_session`), learns it
-- once, in its next prompt block, which marks it `told_at` (as a handoff is delivered once).
ALTER TABLE timeline_events
    ADD COLUMN other_session bigint REFERENCES timeline_sessions (id) ON DELETE SET NULL,
    ADD COLUMN told_at timestamptz;
CREATE INDEX timeline_events_untold ON timeline_events (other_session)
    WHERE kind = 'conflict' AND told_at IS NULL;
