"""Staleness on the client, which has the files: what a fact's source looked like when it was
saved (`fingerprint`) and `factbank verify`'s judgement of each fact against the tree now
(`verify`). The server keeps the verdicts (`factbank.staleness.verify`)."""
