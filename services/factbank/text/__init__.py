"""The text machinery both sides share: the tokeniser (jieba for Chinese), the lexicon of indexed
words, the embedder, and claim comparison (same claim or a correction)."""
