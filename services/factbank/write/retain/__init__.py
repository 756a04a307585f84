"""Retain, one module per step; this face names what the services call."""

from factbank.write.retain.insert import (
    Outcome,
    Restore,
    Vectors,
    add,
    add_many,
    bound_restores,
    embed_fact,
    gated,
    import_many,
    near_duplicates,
    redacted,
    retired_match,
    set_questions,
    supersede,
)

__all__ = [
    "Outcome",
    "Restore",
    "Vectors",
    "add",
    "add_many",
    "bound_restores",
    "embed_fact",
    "gated",
    "import_many",
    "near_duplicates",
    "redacted",
    "retired_match",
    "set_questions",
    "supersede",
]
