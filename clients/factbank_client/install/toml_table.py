"""Put or drop one whole TOML table (e.g. `[mcp_servers.factbank]`) as a text edit.

Why text, not a tomlkit round trip: tomlkit keeps comments and order, but inserting a table
and removing it again does not give back the same bytes (it moves blank lines around, and
files inserted into the middle of a super-table lose the blank line before the next table).
The installer promises that uninstall restores the user's file exactly, so the table we own
is appended as a block of lines and later replaced or cut out as that block. Every result is
parsed back (tomllib) and checked; if the file is shaped so that a text edit cannot do it
(an inline `mcp_servers = {...}`, dotted keys), the caller falls back to tomlkit.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

import tomlkit
from tomlkit.items import InlineTable

from factbank_client.errors import TextEditFailed

_HEADER = re.compile(r"^\s*\[(\[?)\s*(?P<key>[^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key_path(header_key: str) -> tuple[str, ...] | None:
    """`a."b.c".d` -> ("a", "b.c", "d"); None when it is not a key we can read."""
    parts: list[str] = []
    i, s = 0, header_key.strip()
    while i < len(s):
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == '"':
            m = re.match(r'"((?:[^"\\]|\\.)*)"', s[i:])
            if not m:
                return None
            parts.append(json.loads(m.group(0)))
            i += m.end()
        elif i < len(s) and s[i] == "'":
            end = s.find("'", i + 1)
            if end < 0:
                return None
            parts.append(s[i + 1:end])
            i = end + 1
        else:
            m = re.match(r"[A-Za-z0-9_-]+", s[i:])
            if not m:
                return None
            parts.append(m.group(0))
            i += m.end()
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s):
            if s[i] != ".":
                return None
            i += 1
    return tuple(parts)


def render_key(path: Sequence[str]) -> str:
    return ".".join(p if _BARE.match(p) else json.dumps(p, ensure_ascii=False) for p in path)


def render_table(path: Sequence[str], values: Mapping[str, Any]) -> str:
    body = tomlkit.dumps(dict(values))
    return f"[{render_key(path)}]\n{body}"


def _span(lines: list[str], path: tuple[str, ...]) -> tuple[int, int] | None:
    """Line range [start, end) of table `path` (with its sub-tables), ending at its last
    content line: comments and blank lines before the next header belong to what follows."""
    start = None
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if not m:
            continue
        p = key_path(m.group("key"))
        if start is None:
            if p == path and not m.group(1):
                start = i
        elif p is None or p[: len(path)] != path:
            end = i
            break
    else:
        end = len(lines)
    if start is None:
        return None
    while end > start + 1 and (not lines[end - 1].strip()
                               or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return start, end


def lookup(doc: Mapping[str, Any], path: Sequence[str]) -> Any:
    cur: Any = doc
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _with(doc: dict, path: Sequence[str], value: Any) -> dict:
    """A copy of `doc` with `path` set to `value` (None: removed)."""
    out = json.loads(json.dumps(doc, default=str))
    cur = out
    for key in path[:-1]:
        cur = cur.setdefault(key, {})
    if value is None:
        cur.pop(path[-1], None)
    else:
        cur[path[-1]] = json.loads(json.dumps(value, default=str))
    return out


def _without_empty(doc: dict, path: Sequence[str]) -> dict:
    """Drop containers along `path` that are empty: `[a.b]` removed leaves no `a` at all."""
    for depth in range(len(path) - 1, 0, -1):
        parent = lookup(doc, path[: depth - 1]) if depth > 1 else doc
        if isinstance(parent, dict) and parent.get(path[depth - 1]) == {}:
            del parent[path[depth - 1]]
    return doc


def _check(before: str, after: str, path: Sequence[str], expect: Any) -> str:
    """`after` must parse, and differ from `before` only at `path` (now `expect`)."""
    try:
        old, new = tomllib.loads(before), tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:
        raise TextEditFailed(str(exc)) from exc
    want = _without_empty(_with(old, path, expect), path)
    if _without_empty(json.loads(json.dumps(new, default=str)), path) != want:
        raise TextEditFailed(f"{render_key(path)} did not come out as intended")
    return after


def put_table(text: str, path: Sequence[str], values: Mapping[str, Any]) -> str:
    """Replace table `path` in place, or append it after one blank line."""
    path = tuple(path)
    block = render_table(path, values)
    lines = text.splitlines(keepends=True)
    span = _span(lines, path)
    if span is not None:
        start, end = span
        new = "".join(lines[:start]) + block + "".join(lines[end:])
    elif not text:
        new = block
    else:  # one blank line before it, which drop_table removes again
        new = text + ("\n" if text.endswith("\n") else "\n\n") + block
    return _check(text, new, path, dict(values))


def drop_table(text: str, path: Sequence[str]) -> str:
    """Cut table `path` (and its sub-tables) out, with the blank line put_table added."""
    path = tuple(path)
    lines = text.splitlines(keepends=True)
    span = _span(lines, path)
    if span is None:
        return _check(text, text, path, None)  # absent, or in a shape we cannot cut
    start, end = span
    before, after = lines[:start], lines[end:]
    if before and not before[-1].strip() and (not after or not after[0].strip()):
        before = before[:-1]
    return _check(text, "".join(before + after), path, None)


# --- structural fallback (tomlkit) -------------------------------------------------------------


def put(text: str, path: Sequence[str], values: Mapping[str, Any]
        ) -> tuple[str, list[tuple[str, ...]]]:
    """put_table, else a tomlkit edit; returns the text and the containers it had to create.
    Raises TextEditFailed when neither gives exactly the intended document."""
    try:
        return put_table(text, path, values), []
    except TextEditFailed:
        pass
    doc = tomlkit.parse(text)
    created: list[tuple[str, ...]] = []
    cur: Any = doc
    for i, key in enumerate(path[:-1]):
        if key not in cur:
            cur[key] = tomlkit.table(is_super_table=True)
            created.append(tuple(path[: i + 1]))
        cur = cur[key]
    item = tomlkit.inline_table() if isinstance(cur, InlineTable) else tomlkit.table()
    for k, v in values.items():
        item[k] = v
    cur[path[-1]] = item
    out = tomlkit.dumps(doc)
    return _check(text, out, path, dict(values)), created


def drop(text: str, path: Sequence[str]) -> str:
    """drop_table, else a tomlkit edit (checked the same way)."""
    try:
        return drop_table(text, path)
    except TextEditFailed:
        doc = tomlkit.parse(text)
        parent = lookup(doc, path[:-1])
        if parent is not None and path[-1] in parent:
            del parent[path[-1]]
        return _check(text, tomlkit.dumps(doc), path, None)


def prune_empty(text: str, created: Sequence[Sequence[str]]) -> str:
    """Remove the containers a structural `put` created, if they are empty now."""
    if not created:
        return text
    doc = tomlkit.parse(text)
    changed = False
    for c in sorted((tuple(c) for c in created), key=len, reverse=True):
        parent = lookup(doc, c[:-1]) if len(c) > 1 else doc
        if parent is not None and c[-1] in parent and not parent[c[-1]]:
            del parent[c[-1]]
            changed = True
    return tomlkit.dumps(doc) if changed else text
