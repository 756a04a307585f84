"""Sources change, facts follow (docs/staleness.md): the staleness domain of the server.

- verify: what a client found of its facts' sources (fresh, moved, stale), applied in one
  transaction;
- check: what `POST /v1/facts` would do with each of a list of facts, saving nothing (the
  candidates of `factbank migrate-native`), by retain's own steps;
- rules: the rule-promotion gate, which facts held in two unrelated projects.

Derived facts' review cascade (`write/derived.py`) is this domain's too, but it stays on the
write side: every supersede, delete and purge runs it inside its own transaction, so retain and
lifecycle import it, and this folder, which imports retain and the review queue, sits above
them. Moved here, it would tie the two folders to each other both ways.
"""
