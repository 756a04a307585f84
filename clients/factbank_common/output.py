"""Printing for commands: a table for people, JSON for scripts (`--json`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from factbank_common.inert import inert, json_inert


def ago(seconds: float, units: Sequence[str] = ("s", "m", "h", "d")) -> str:
    """How long ago, in the largest whole unit: "42s ago", "5m ago", "3h ago", "2d ago" (a
    future time reads as 0s). `units` spells seconds, minutes, hours and days: the client's
    tables write "5m", the server's conflict lines "5 min"."""
    seconds = max(0, int(seconds))
    for size, unit in ((86400, units[3]), (3600, units[2]), (60, units[1])):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}{units[0]} ago"


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if hasattr(value, "__dict__"):
        return vars(value)
    return str(value)


def print_json(data: Any) -> None:
    sys.stdout.write(json_inert(json.dumps(data, ensure_ascii=False, indent=2,
                                           default=_default)) + "\n")


def _cell(value: Any) -> str:
    """A table cell: one inert line (a bank's text cannot add rows or terminal escapes)."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, list | tuple):
        return inert(",".join(str(v) for v in value))
    return inert(value)


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def add_json_flag(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def file_line(action: str, path: Any, detail: str = "") -> str:
    """The one wording for a file a command wrote, or would write: `created PATH`,
    `deleted PATH`, `renamed PATH (to X: ...)`. Verb first, no colon, as `created team bank`
    and `deleted fact 1` read (`install` said `created PATH`, `install git`
    `created: PATH`)."""
    return f"{action} {path}" + (f" ({detail})" if detail else "")


def dry_run_line(changes: int) -> str:
    """The last line of every --dry-run that shows a diff."""
    return f"(dry run: {changes} file(s) would change; nothing written)"
