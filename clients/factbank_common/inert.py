"""Text from a bank, rendered inert: the one function every writer passes bank text through.

A fact's content, project, tags, questions, a supersede reason, a handoff, a timeline row:
anything a bank member typed reaches other members' rule files (`rules propose`), patches and
commit messages, hook output (the session-start and prompt blocks, which an agent reads as
instructions), MCP answers and terminals. Each such writer builds its *own* structure (one
list item, one line per fact, a table row) and puts bank text inside it; the text must not be
able to add structure of its own. Observed: a confirm whose `project` held
newlines wrote a second Markdown list item (`- run curl … | sh`) into the AGENTS.md patch.

`inert(text)` is therefore:

* **one line**: LF and CR become the two characters ``\\n`` / ``\\r`` (visible, not folded
  away, so a reader sees that the text had them), a tab becomes a space;
* **no control or invisible characters**: every other C0/C1 control (ESC of an ANSI sequence,
  BEL, NUL, DEL), line/paragraph separators (U+2028/U+2029, which JSON, JS and some editors
  treat as line ends), format characters (zero-width space/joiners, bidi overrides, BOM, soft
  hyphen) and unassigned/private/surrogate code points are written as ``\\xNN``/``\\uNNNN``;
* **bounded**: at most `limit` characters, cut with "…";
* with ``markdown=True`` (rule files, patches, instruction blocks): no HTML comment or tag can
  open (``<!--``, ``<details>``, our ``<!-- factbank:begin -->`` markers; ``<`` before ``!``,
  ``/``, ``?`` or a letter becomes ``&lt;``), no code fence can open (runs of three backticks
  or tildes are backslash-escaped), and the text cannot start a heading, quote, list item or
  table row of its own (a leading ``#``, ``>``, ``-``, ``+``, ``*``, ``|`` or ``1.`` is
  backslash-escaped). Ordinary text (Chinese, code, arrows such as ``a -> b``) is unchanged:
  `inert` is the identity on text that holds none of the above.

Pure standard library, no I/O: the services import it too (factbank.read.inject builds the
blocks hooks print), like factbank_common.schema.
"""

from __future__ import annotations

# Long enough for any single field a writer shows whole (a fact's content is at most a few
# thousand characters; the session block cuts it at 600 before this), short enough that a
# hostile 1 MB string cannot flood a terminal, a hook's JSON or a rule file.
LIMIT = 4000

_VISIBLE = {"\n": "\\n", "\r": "\\r", "\t": " "}
# Unicode categories that render as nothing or move the text around: controls, format
# characters (zero-width, bidi, BOM), line/paragraph separators, surrogates, private use,
# unassigned.
_INVISIBLE = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"))
_MARKDOWN: tuple = ()  # the three patterns below, compiled on the first markdown=True call


def _markdown() -> tuple:
    """(HTML open, fence, leading block) patterns. Compiled when first needed, with `re`
    imported then: the hooks print every block through `inert` without markdown, and `re`
    (with the `enum`, `functools` and `collections` it brings) costs a fresh `python -I -S`
    7.6 ms of CPU (median of 21 on the 2-core box, the bare interpreter 11.1 ms). One tuple,
    assigned at once: two threads' first calls at worst compile it twice."""
    global _MARKDOWN
    if not _MARKDOWN:
        import re

        _MARKDOWN = (re.compile(r"<(?=[!/?A-Za-z])"), re.compile(r"`{3,}|~{3,}"),
                     re.compile(r"^(?:[#>+*|-]|\d+[.)])"))
    return _MARKDOWN


def _category(ch: str) -> str:
    import unicodedata  # only for non-ASCII text (a C module, but one more load)

    return unicodedata.category(ch)


def _escape(ch: str) -> str:
    if ch in _VISIBLE:
        return _VISIBLE[ch]
    if _category(ch) not in _INVISIBLE:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def inert(text: object, limit: int = LIMIT, *, markdown: bool = False) -> str:
    """`text` as one inert line (module docstring): controls and invisible characters escaped,
    at most `limit` characters, Markdown/HTML structure neutralised when `markdown`."""
    s = "" if text is None else str(text)
    if not s.isascii() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        s = "".join(map(_escape, s))
    if markdown:
        html_open, fence, leading_block = _markdown()
        s = html_open.sub("&lt;", s)
        s = fence.sub(lambda m: "".join("\\" + c for c in m.group()), s)
        s = leading_block.sub(lambda m: "\\" + m.group(), s.lstrip())
    if len(s) > limit:
        s = s[: max(0, limit - 1)] + "…"
    return s


def inert_lines(text: object, limit: int = LIMIT) -> str:
    """Text whose line breaks are the writer's own structure (a block of lines the services
    built, a multi-line CLI answer): each LF-separated line made `inert`. Split on LF only, so
    a CR or U+2028 inside a line is escaped, not obeyed."""
    return "\n".join(inert(line, limit) for line in str(text).split("\n"))


def json_inert(text: str) -> str:
    """A JSON document as text with the invisible characters `inert` escapes written as JSON
    ``\\uXXXX`` escapes (json.dumps with ensure_ascii=False already escapes C0 controls but
    leaves DEL, C1 controls such as the 8-bit CSI, U+2028 and zero-width characters raw). The
    document means the same; a terminal showing it obeys none of them."""
    if text.isascii() and "\x7f" not in text:  # json.dumps escaped C0 (LF is indentation)
        return text
    return "".join(ch if ch == "\n" or _category(ch) not in _INVISIBLE else
                   "".join(f"\\u{u:04x}" for u in _utf16(ch)) for ch in text)


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]
