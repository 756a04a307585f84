"""`json.loads` / `json.dumps` with json's default options, without importing `json`.

The hooks parse one payload and print one answer per process. Importing `json` imports
`json.decoder` and `json.encoder`, which import `re` for two patterns the C accelerator never
uses, and `re` imports `enum`, `functools` and `collections`: 10.4 ms of CPU in a fresh
`python -I -S` on the 2-core box (median of 21, same sitting as the bare interpreter's
11.1 ms), a fifth of what the prompt hook cost. Here the same C code json runs (`_json`'s
scanner and encoder, the C extension json loads) does the work, so the result is json's own;
anything off the fast path (bytes, a BOM, a malformed document) goes to `json` itself, which
then gives its exact answer or error. tests/unit/test_hook_imports.py compares the two.
"""

import _json  # no `from __future__ import annotations`: even that is a module to load


def _constant(name: str) -> float:
    return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


class _Context:
    """What `_json.make_scanner` reads from its context (json.JSONDecoder's defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


_scan = _json.make_scanner(_Context())
_SPACE = " \t\n\r"  # json.decoder.WHITESPACE


def loads(s: object) -> object:
    """json.loads(s)."""
    if isinstance(s, (bytes, bytearray)) and 0 not in s[:4] and not s.startswith(
            (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        s = s.decode("utf-8", "surrogatepass")  # json.detect_encoding's answer for these
    if isinstance(s, str) and not s.startswith("\ufeff"):
        start = len(s) - len(s.lstrip(_SPACE))
        try:
            obj, end = _scan(s, start)
        except StopIteration:
            obj, end = None, -1
        if end >= 0 and not s[end:].strip(_SPACE):
            return obj
    import json  # the slow path gives json's own answer, or its own error

    return json.loads(s)  # type: ignore[arg-type]


def load(fh: object) -> object:
    """json.load(fh)."""
    return loads(fh.read())  # type: ignore[attr-defined]


def _default(o: object) -> object:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def dumps(obj: object, ensure_ascii: bool = True) -> str:
    """json.dumps(obj, ensure_ascii=ensure_ascii)."""
    escape = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(obj, str):
        return escape(obj)
    # json.JSONEncoder.iterencode's one-shot C encoder: check_circular (a markers dict),
    # separators ", " and ": ", no sort, no skipkeys, allow_nan.
    encode = _json.make_encoder({}, _default, escape, None, ": ", ", ", False, False, True)
    return "".join(encode(obj, 0))
