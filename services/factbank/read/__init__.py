"""The read side: hybrid search, fusion and its gate, injection, why, cache."""
