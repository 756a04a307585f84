-- The audit chain becomes keyed. Until now a row's hash was sha256(prev || row):
-- anyone with write access to the table could delete a row and recompute every hash after it,
-- and `audit verify` said ok. From here on a row's hash is HMAC-SHA256 under a key that is not
-- in the database (FACTBANK_AUDIT_KEY or the key file beside FACTBANK_HOME), and the chains'
-- heads are kept outside it too (docs/operations.md, "The audit log").
--
-- The rows already written stay as they are and stay verifiable: `keyed_from` records the
-- first id of the keyed chain (every row before it is checked as sha256). The services also
-- copy it into the head file outside the database on their first start, so raising it here to
-- pass re-hashed rows off as old ones is caught.
CREATE TABLE audit_keyed (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    keyed_from bigint NOT NULL
);
INSERT INTO audit_keyed (keyed_from)
SELECT coalesce(max(id), 0) + 1 FROM audit_log;

CREATE TRIGGER audit_keyed_no_update BEFORE UPDATE OR DELETE ON audit_keyed
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- TRUNCATE fires no row trigger: it emptied the log without a word.
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_keyed_no_truncate BEFORE TRUNCATE ON audit_keyed
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
