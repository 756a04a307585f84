"""A docs table generated from code: what the docs show between two markers must be what
`python -m <module>` prints, and what `table()` returns (the client's and the server's
settings tables)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def assert_current(doc: str, marker: str, module: str, table: Callable[[], str]) -> None:
    """`doc` (relative to the repository) shows `module`'s output between
    `<!-- {marker}:start -->` and `<!-- {marker}:end -->`."""
    text = (ROOT / doc).read_text("utf-8")
    shown = text.split(f"<!-- {marker}:start -->\n", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    assert shown == table(), f"{doc} is stale: paste `python -m {module}`' output there"
    printed = subprocess.run([sys.executable, "-m", module],
                             capture_output=True, text=True, check=True).stdout
    assert printed == shown
