"""The client config's TOML, read without `tomllib` when it holds only what a config holds.

Every hook reads the config (~/.config/factbank/config.toml): `url = "..."`, `recall_url`,
`team_categories = ["...", ...]` and one `[banks.<name>]` table with a `token` each, comments
and blank lines between. Importing `tomllib` costs a fresh `python -I -S` 20.5 ms of CPU
(it brings `re`, `typing`, `datetime` and `string`; median of 21 on the 2-core box, in the
same sitting as the bare interpreter's 11.1 ms): nearly twice the interpreter's own start, at
every prompt. So `load` reads that subset itself, line by line: bare keys, bare table
headers, single-line basic strings without escapes, literal strings, single-line arrays of
those, comments. Anything else (an escape, a number, an inline table, a quoted or dotted key,
a multi-line value, a redefined key or table, a stray character) returns None from `parse`,
and `load` hands the whole file to `tomllib`, which then gives its own answer or its own
error. So the result is always tomllib's (tests/unit/test_hook_imports.py compares the two).
"""

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SPACE = " \t"


def _clean(text: str) -> bool:
    """No control character TOML forbids in a string or a comment (tab is allowed)."""
    return not any((c < " " and c != "\t") or c == "\x7f" for c in text)


def _rest_ok(rest: str) -> bool:
    """What may follow a value or a header on its line: nothing, or a comment."""
    rest = rest.strip(_SPACE)
    return not rest or (rest[0] == "#" and _clean(rest))


def _bare(key: str) -> bool:
    return bool(key) and set(key) <= _BARE


def _string(text: str) -> tuple[str, str] | None:
    """(the string, what follows it) for a basic string without escapes or a literal string
    at the start of `text`; None for anything else."""
    quote = text[:1]
    if quote not in ('"', "'") or text[:3] == quote * 3:
        return None
    end = text.find(quote, 1)
    if end < 0:
        return None
    value = text[1:end]
    if (quote == '"' and "\\" in value) or not _clean(value):
        return None
    return value, text[end + 1:]


def _value(text: str) -> tuple[object, str] | None:
    """(a string or an array of strings, what follows it), or None."""
    if text[:1] != "[":
        return _string(text)
    items: list[str] = []
    rest = text[1:].lstrip(_SPACE)
    while not rest.startswith("]"):
        got = _string(rest)
        if got is None:
            return None
        items.append(got[0])
        rest = got[1].lstrip(_SPACE)
        if rest.startswith(","):
            rest = rest[1:].lstrip(_SPACE)
        elif not rest.startswith("]"):
            return None
    return items, rest[1:]


def parse(data: bytes) -> dict | None:
    """The document `data` holds, when it is within the subset above, else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    root: dict = {}
    table = root
    defined: set[tuple[str, ...]] = set()
    for line in text.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if "\r" in line:
            return None
        s = line.strip(_SPACE)
        if not s or s[0] == "#":
            if not _clean(s):
                return None
            continue
        if s[0] == "[":
            end = s.find("]")
            if s[:2] == "[[" or end < 0 or not _rest_ok(s[end + 1:]):
                return None
            names = tuple(p.strip(_SPACE) for p in s[1:end].split("."))
            if not all(_bare(p) for p in names) or names in defined:
                return None
            defined.add(names)
            table = root
            for name in names:
                table = table.setdefault(name, {})
                if not isinstance(table, dict):
                    return None
            continue
        key, eq, value = s.partition("=")
        key = key.strip(_SPACE)
        got = _value(value.strip(_SPACE)) if eq else None
        if got is None or not _bare(key) or key in table or not _rest_ok(got[1]):
            return None
        table[key] = got[0]
    return root


def load(fh: object) -> dict:
    """tomllib.load(fh) (a file opened in binary mode)."""
    data = fh.read()  # type: ignore[attr-defined]
    got = parse(data)
    if got is not None:
        return got
    import tomllib

    return tomllib.loads(data.decode())
