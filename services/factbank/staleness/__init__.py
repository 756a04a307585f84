"""Sources change, facts follow (docs/staleness.md): verify, check, and the rule-promotion gate."""
