"""Secrets planted through every route and searched for in every table: the shared probe of
the "secrets never land" tests (docs/principles.md#secrets-never-land)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

AWS = "AKIAQ7R2X9KD4M3ZTB5W"
GITHUB = "ghp_R7mK2xQ9vL4pT8wN3jH6sD1fG5aZ0cB4yE2u"
PASSWORD = "hunter2-Xy9!long"
PROSE = "Xy7!pQ2zLm9wQ"
PROSE_ZH = "Mn5$kQ8wLz2pR"


SECRETS = {
    AWS: AWS,
    GITHUB: GITHUB,
    f"password = {PASSWORD}": PASSWORD,
    # Secrets written as prose, the secret word right before the value.
    f"what is the backup password {PROSE}?": PROSE,
    f"备份密码 {PROSE_ZH}": PROSE_ZH,
}


def plantings(value: Any, secret: str, path: str = "") -> Iterator[tuple[str, Any]]:
    """(where, copy) with `secret` in each string leaf, and in each list (as one more item)."""
    if isinstance(value, str):
        if value != "{fact_id}":
            yield path, secret
    elif isinstance(value, dict):
        for k, v in value.items():
            for where, new in plantings(v, secret, f"{path}.{k}"):
                out = copy.deepcopy(value)
                out[k] = new
                yield where, out
    elif isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            yield f"{path}[+]", [*value, secret]
        for i, v in enumerate(value):
            for where, new in plantings(v, secret, f"{path}[{i}]"):
                out = copy.deepcopy(value)
                out[i] = new
                yield where, out


def leaks(text: str) -> list[str]:
    return [shown for shown in SECRETS.values() if shown in text]


async def dump_tables(conn) -> dict[str, str]:
    tables = await conn.fetch(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    out = {}
    for t in tables:
        name = t["table_name"]
        rows = await conn.fetch(f'SELECT t::text AS row FROM "{name}" t')
        out[name] = "\n".join(r["row"] for r in rows)
    return out
