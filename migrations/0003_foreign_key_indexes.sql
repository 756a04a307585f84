-- An index under every foreign key's referencing column. Deleting a row checks (or cascades
-- to) the rows that reference it; without an index each check scans the whole referencing
-- table, once per deleted row. Deleting a 100,000-fact bank ran for over ten minutes on the
-- unindexed facts.superseded_by (a self-reference, checked for every fact deleted) and
-- fact_events.related_fact; a purge's "who points at this fact" updates scanned the same way.
CREATE INDEX facts_superseded_by ON facts (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX facts_created_by_member ON facts (created_by_member);
CREATE INDEX fact_events_related_fact ON fact_events (related_fact) WHERE related_fact IS NOT NULL;
CREATE INDEX fact_events_bank ON fact_events (bank_id);
CREATE INDEX fact_events_member ON fact_events (member_id) WHERE member_id IS NOT NULL;
CREATE INDEX tokens_member ON tokens (member_id);
CREATE INDEX tokens_rotated_to ON tokens (rotated_to) WHERE rotated_to IS NOT NULL;
