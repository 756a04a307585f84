"""Where a quote stands in a text, whitespace normalised: the one rule `factbank add`
(`client.check_file_quote`), `factbank verify` (`verify`), the hooks' check before inject
(`worktree`) and successor proposals (`successor`) share, so all agree on what "still there"
means. A leaf: it imports nothing of the client."""

from __future__ import annotations

import re


def _words_with_lines(text: str) -> tuple[str, list[int], list[int]]:
    """The text with all whitespace collapsed, each word's offset in it, and its line."""
    words, offsets, lines = [], [], []
    pos = 0
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    li = 0
    for m in re.finditer(r"\S+", text):
        while li + 1 < len(line_starts) and line_starts[li + 1] <= m.start():
            li += 1
        words.append(m.group())
        offsets.append(pos)
        lines.append(li + 1)
        pos += len(m.group()) + 1
    return " ".join(words), offsets, lines


def quote_spans(text: str, quote: str) -> list[tuple[int, int]]:
    """Every occurrence of `quote` in `text`, whitespace normalised, as (first line, last
    line), 1-based, in file order. `factbank add` checks a quote with it and `factbank verify`
    looks for the quote again with it, so both agree on what "still there" means."""
    import bisect  # here, not at the top: the hooks' worktree check uses quote_in only

    haystack, offsets, word_lines = _words_with_lines(text)
    needle = " ".join(quote.split())
    found: list[tuple[int, int]] = []
    if not needle:
        return found
    start = haystack.find(needle)
    while start != -1:
        first = bisect.bisect_right(offsets, start) - 1
        last = bisect.bisect_right(offsets, start + len(needle) - 1) - 1
        found.append((word_lines[max(first, 0)], word_lines[max(last, 0)]))
        start = haystack.find(needle, start + 1)
    return found
