-- The identity of a timeline event (issue 15, history backfill): the client names each event it
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
