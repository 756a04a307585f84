"""Facts anchored to symbols: a file source may name a definition, `src/net.py::RetryPolicy.
backoff`, instead of a line (docs/staleness.md#symbol-anchors). The fact then moves with the
symbol (lines inserted above it, the function moved within its file or to another file, its
class renamed) and goes stale only when the symbol's own text changes or it is gone.

The fingerprint of a symbol is the sha256 of its **normalised text**: the definition's tokens
as tree-sitter's grammar reads them (symbols.py finds the definition: decorators and Rust
attributes included), comments left out, joined by one separator, so whitespace between
tokens does not count. What does count, and why:

* every token, strings' contents included (a changed string literal changes what the code
  does), and the definition's own name (a renamed function is a different claim);
* Python's blocks, as a `{`/`}` pair around each `block` node: indentation is syntax there
  (`b()` moved into or out of an `if` changes the token stream by nothing else), while the
  amount of indentation is not (a method moved to module level, a body reindented from four
  spaces to two, keeps its digest);
* inside multi-line strings, the indentation at the start of each line does not count (a
  docstring reindented with its method is the same docstring);
* Go's semicolons do not count: a newline ends a statement as `;` does (gofmt writes one
  form, a hand edit may write the other);
* JavaScript's optional semicolons do count: `a\\n(b)` and `a;\\n(b)` differ in meaning, and a
  formatter that adds them is an edit a reviewer sees.

Comments never count: a fact whose quote is a comment still goes stale when that comment goes,
because verify also checks that the quote is still inside the symbol (the quote is the
evidence; the digest is what the code does).

Parsing costs a few milliseconds per file (tree-sitter; evals/staleness.py measures verify as
a whole), and only files whose blob changed since the fingerprint are parsed at all.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from factbank_client.code import symbols
from factbank_common.schema import symbol_language

_SEP = b"\x1f"
_INDENT = re.compile(rb"\n[ \t]+")
_TRAIL = re.compile(rb"[ \t]+\n")


@dataclass
class Anchor:
    """One definition of a file, as a symbol anchor sees it. Its digest is computed when
    first asked for: verify needs the digest of one or two definitions of a file, not of all
    (walking every definition's tree from Python cost ~0.2 s on a 35 kB module)."""

    qualname: str
    kind: str
    start_line: int
    end_line: int
    text: str
    _tree: Any = field(repr=False, compare=False, default=None)
    _span: tuple[bytes, int, int, str] = field(repr=False, compare=False,
                                               default=(b"", 0, 0, ""))
    _digest: str | None = field(repr=False, compare=False, default=None)

    @property
    def digest(self) -> str:
        if self._digest is None:
            src, start, end, language = self._span
            self._digest = digest_of(self._tree, src, start, end, language)
        return self._digest

    @property
    def lines(self) -> int:
        return self.end_line - self.start_line + 1


class SymbolNotFound(LookupError):
    """The symbol is not defined in the file (the message names what is)."""


def normalised(root, src: bytes, start: int, end: int, language: str) -> bytes:
    """The tokens of src[start:end] under tree-sitter's tree `root`, as the digest hashes
    them (see the module docstring). Iterative: a deep expression must not hit Python's
    recursion limit."""
    python = language == "python"
    go = language == "go"
    out: list[bytes] = []

    def piece(raw: bytes) -> None:
        # A token as written, with the indentation of a multi-line string's lines dropped;
        # nothing for whitespace alone (Go's newline statement terminators are tokens).
        raw = _TRAIL.sub(b"\n", _INDENT.sub(b"\n", raw.replace(b"\r\n", b"\n")))
        if raw.strip():
            out.append(raw)

    top = root.descendant_for_byte_range(start, max(start, end - 1)) or root
    stack: list = [top]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):  # a gap or a block marker, already in order
            if item[0] == "mark":
                out.append(item[1])
            else:
                piece(item[1])
            continue
        node = item
        if node.end_byte <= start or node.start_byte >= end or "comment" in node.type:
            continue
        if node.child_count == 0:
            if go and node.type == ";":
                continue
            piece(src[max(node.start_byte, start):min(node.end_byte, end)])
            continue
        # Children in order, with the text between them that no child covers (string
        # contents in grammars that leave them unnamed): pushed in reverse onto the stack.
        parts: list = []
        if python and node.type == "block":
            parts.append(("mark", b"{"))
        pos = max(node.start_byte, start)
        for child in node.children:
            gap = src[pos:min(child.start_byte, end)]
            if gap.strip():
                parts.append(("gap", gap))
            parts.append(child)
            pos = max(pos, child.end_byte)
        tail = src[pos:min(node.end_byte, end)]
        if tail.strip():
            parts.append(("gap", tail))
        if python and node.type == "block":
            parts.append(("mark", b"}"))
        stack.extend(reversed(parts))
    return _SEP.join(out)


def digest_of(root, src: bytes, start: int, end: int, language: str) -> str:
    return hashlib.sha256(normalised(root, src, start, end, language)).hexdigest()


def anchors(data: bytes, path: str) -> list[Anchor]:
    """Every definition of a file with its digest, in source order (one parse). [] for a
    file of a language without symbols (schema.SYMBOL_LANGUAGES). ImportError when the
    grammars are not installed."""
    language = symbol_language(path)
    if language is None:
        return []
    tree, src = symbols.parse(data, language)
    root = tree.root_node
    return [Anchor(s.qualname, s.kind, s.start_line, s.end_line, s.text, root,
                   (src, s.start_byte, s.end_byte, language))
            for s in symbols.definitions_in(root, src, language)]


def resolve(data: bytes, path: str, qualname: str, near: int | None = None) -> Anchor:
    """The definition `qualname` names in this file (of several, the one nearest line
    `near`, else the first); SymbolNotFound naming what the file defines."""
    found = anchors(data, path)
    same = [a for a in found if a.qualname == qualname]
    if same:
        return nearest(same, near)
    names = [a.qualname for a in found if a.kind != "variable"] or [a.qualname for a in found]
    close = difflib.get_close_matches(qualname, names, n=3, cutoff=0.6)
    shown = close or names[:8]
    more = ", ..." if not close and len(names) > len(shown) else ""
    hint = f"; it defines {', '.join(shown)}{more}" if shown else "; it defines no symbols"
    raise SymbolNotFound(f"symbol {qualname} is not defined in {path}{hint}")


def nearest(candidates: list[Anchor], line: int | None) -> Anchor:
    if line is None:
        return candidates[0]
    return min(candidates, key=lambda a: (abs(a.start_line - line), a.start_line))
