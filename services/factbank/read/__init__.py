"""The read side: tokeniser and lexicon, embedder, hybrid search, fusion and its gate,
injection, cache."""
