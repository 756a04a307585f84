"""The wire contract's constants, in one place: where a fact comes from, who vouches for it,
and the limits the agent tools state.

Read by the server (`factbank.models` takes `SourceKind` and `Origin` from here), the CLI (the
`--source-kind` and `--origin` choices), the MCP server (its input schemas) and the Pi
extension (the installer writes these values into it, beside the tool texts).

Why the server imports this module of the client package, not the other way round: the light
client installs without the server extra and must not import server code, while every install
of this one distribution ships this file. It imports nothing but `typing` (a test holds it to
that), so the services depend on a list of words, never on client code. The alternative, a
copy on each side and a test that they agree, keeps the two copies this module removes.
"""

from __future__ import annotations

from typing import Literal, get_args

SourceKind = Literal["file", "url", "commit", "command", "user", "doc", "fact"]
Origin = Literal["user", "verified", "inferred"]

SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
ORIGINS: tuple[str, ...] = get_args(Origin)

# Writer questions a fact may carry; the server refuses more (`factbank.write.gate.
# MAX_QUESTIONS`, held equal by a test), so the agent tools say it in their schemas.
MAX_QUESTIONS = 6

# The agent tools' `search`: results by default and at most (the service allows more; an agent
# wants a few good facts, not a page).
SEARCH_LIMIT = 5
SEARCH_LIMIT_MAX = 20

# A file source may name a symbol instead of a line: "src/net.py::RetryPolicy.backoff"
# (docs/staleness.md#symbol-anchors). The fact then moves with the symbol and goes stale only
# when the symbol's own text changes. The languages whose files can be parsed for symbols, by
# file suffix (the client parses with tree-sitter: factbank_client/code/symbols.py; the server
# only checks the shape, it never reads a file).
SYMBOL_SEPARATOR = "::"
SYMBOL_LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
}
MAX_SYMBOL_CHARS = 300
SYMBOL_EXAMPLE = "src/net.py::RetryPolicy.backoff"


def split_symbol(location: str) -> tuple[str, str] | None:
    """(path, qualified name) of a symbol location, None for any other location. The name is
    what follows the first "::"; it is checked by `symbol_problem`."""
    path, sep, name = location.strip().partition(SYMBOL_SEPARATOR)
    return (path.strip(), name.strip()) if sep else None


def symbol_language(path: str) -> str | None:
    """The language of a file whose symbols can be anchored to, from its suffix."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return SYMBOL_LANGUAGES.get(name[dot:].lower()) if dot > 0 else None


def symbol_problem(location: str) -> str | None:
    """Why a symbol location is not one (None: it is, or it names no symbol). One check for
    the server's gate and the client, so both refuse the same locations with the same words."""
    parts = split_symbol(location)
    if parts is None:
        return None
    path, name = parts
    if not path or not name:
        return f"a symbol source is path::Qualified.name, e.g. {SYMBOL_EXAMPLE}"
    if len(name) > MAX_SYMBOL_CHARS:
        return f"the symbol name is longer than {MAX_SYMBOL_CHARS} characters"
    if ":" in name or any(c.isspace() for c in name) or name.startswith(".") \
            or name.endswith(".") or ".." in name:
        return (f"'{name}' is not a qualified name (dotted, no spaces or colons), e.g. "
                f"{SYMBOL_EXAMPLE}")
    if symbol_language(path) is None:
        kinds = ", ".join(sorted(SYMBOL_LANGUAGES))
        return (f"symbol anchors are for Python, JavaScript/TypeScript, Go and Rust files "
                f"({kinds}); '{path}' is none of them: cite it as path:line instead")
    return None
