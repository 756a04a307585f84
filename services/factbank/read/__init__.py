"""The read side: hybrid search, fusion and its gate, injection, the rule-promotion gate, cache."""
