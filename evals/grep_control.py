"""The grep control: what an agent with a notes file and `grep` would get (MISSION
docs/principles.md#benchmarks-must-be-hard).

An earlier memory system scored 1.000 with a plain LIKE scan, because every query shared a word
with its answer. So every result of ours is compared with this control, and the control has to
be a competent grep, not a strawman. Exactly what it does:

1. The memory is one plain-text file, one fact per line, in the order the facts were written
   (an append-only notes file: a superseded fact's line stays, its successor comes later). A
   line is the fact's text plus the tags its writer gave it (`content  [tags: a, b]`), the same
   text the bank indexes, so grep sees every word factbank sees.
2. The search words are the query's whole words (`factbank.text.tokenizer.words`: jieba words for
   Chinese, identifiers kept whole for everything else: `E0502`, `127.0.0.1:4010`, `@kite/ui`),
   minus function words (`factbank.text.tokenizer.STOPWORDS`), single Chinese characters and
   one-letter words (either would match nearly every line). English words of 5+ letters lose
   an inflection suffix (`-s -es -ed -ing`), as a person typing a grep would (`deploys` ->
   `deploy`), so the substring still matches the other forms.
3. One real `grep -n -i -F -e w1 -e w2 ... notes.txt` (fixed strings, case-insensitive; any word
   matches), run as a subprocess, the way an agent's shell tool runs it.
4. The printed lines are ranked by how many distinct search words each contains, then newest
   line first (an agent reading `grep` output trusts the latest note), ties by line number.
5. No line printed = the control refuses (it returns nothing).

Cost: the tokens of every printed line (grep does not rank or cut; the agent reads all of it),
estimated with `factbank.read.inject.estimate_tokens`, the estimator the injection budget uses.
Latency: wall time of the grep subprocess plus the ranking, on this machine. Both flatter
grep compared with a real agent, which also pays a tool call round trip through its model.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from factbank.read.inject import estimate_tokens
from factbank.text.tokenizer import STOPWORDS, words

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SUFFIXES = ("ing", "es", "ed", "s")


@dataclass
class GrepHit:
    key: str
    line: str
    matched: int


@dataclass
class GrepResult:
    hits: list[GrepHit]  # ranked, every printed line
    ms: float
    tokens: int  # estimated tokens of every printed line
    patterns: list[str]

    @property
    def ranked(self) -> list[str]:
        return [h.key for h in self.hits]


def _stem(word: str) -> str:
    if word.isascii() and word.isalpha() and len(word) >= 5:
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 4:
                return word[: -len(suffix)]
    return word


def patterns(query: str) -> list[str]:
    """The fixed strings an agent would grep for (see the module docstring, step 2)."""
    out: list[str] = []
    for w in words(query):
        w = w.strip(".-/:@+~'#")
        if w in STOPWORDS or w.endswith("n't"):
            continue
        if _CJK.search(w) and len(w) < 2:
            continue
        if not _CJK.search(w) and len(w) < 2:
            continue
        w = _stem(w)
        if w not in out:
            out.append(w)
    return out


def line_for(content: str, tags: Sequence[str] = ()) -> str:
    text = " ".join(content.split())
    return f"{text}  [tags: {', '.join(tags)}]" if tags else text


class GrepControl:
    """A notes file on disk and a real grep over it; use as a context manager."""

    def __init__(self, entries: Sequence[tuple[str, str]]) -> None:
        """`entries`: (key, line) in write order; a key may repeat (its last line wins)."""
        self.keys = [k for k, _ in entries]
        self.lines = [" ".join(line.split()) for _, line in entries]
        self._dir = Path(tempfile.mkdtemp(prefix="factbank-grep-"))
        self.path = self._dir / "notes.txt"
        self.path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        self.grep = shutil.which("grep")

    def __enter__(self) -> GrepControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self, pats: list[str]) -> list[tuple[int, str]]:
        if self.grep is None:  # no grep binary: the same semantics in Python
            low = [p.casefold() for p in pats]
            return [
                (i, line) for i, line in enumerate(self.lines)
                if any(p in line.casefold() for p in low)
            ]
        args = [self.grep, "-n", "-i", "-F"]
        for p in pats:
            args += ["-e", p]
        proc = subprocess.run(
            [*args, str(self.path)],
            capture_output=True,
            env={"LC_ALL": "C.UTF-8"},
            check=False,
        )
        if proc.returncode > 1:
            raise RuntimeError(f"grep failed: {proc.stderr.decode(errors='replace')}")
        out = []
        for raw in proc.stdout.decode("utf-8", "replace").splitlines():
            num, _, line = raw.partition(":")
            out.append((int(num) - 1, line))
        return out

    def search(self, query: str) -> GrepResult:
        t = time.perf_counter()
        pats = patterns(query)
        printed = self._run(pats) if pats else []
        low = [p.casefold() for p in pats]
        scored = []
        for i, line in printed:
            folded = line.casefold()
            scored.append((sum(p in folded for p in low), i, line))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        hits: list[GrepHit] = []
        seen: set[str] = set()
        for matched, i, line in scored:
            key = self.keys[i]
            if key not in seen:
                seen.add(key)
                hits.append(GrepHit(key, line, matched))
        ms = (time.perf_counter() - t) * 1000
        tokens = sum(estimate_tokens(line) for _, line in printed)
        return GrepResult(hits, ms, tokens, pats)
