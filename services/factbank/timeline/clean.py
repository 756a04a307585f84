"""Redaction of the timeline's texts: every text field of an event or a handoff redacted
together under the bank's policy before it is stored, and paths made relative."""

from __future__ import annotations

from typing import Any

from factbank.redact import redaction
from factbank.timeline.models import NewEvent


def clean(fields: dict[str, Any], policy: str) -> dict[str, Any]:
    """Every text field redacted together (a secret in one is removed from the others), or
    refused under the bank's `reject` policy (`errors.Refused` naming the field)."""
    present = {k: v for k, v in fields.items() if isinstance(v, (str, list)) and v}
    if not present:
        return fields
    clean = redaction.clean_fields(present, policy)
    return {**fields, **clean}


def clean_event(e: NewEvent, agent: str, policy: str) -> dict[str, Any]:
    return clean(
        {
            "session_id": e.session_id,
            "project": e.project,
            "agent": e.agent or agent,
            "machine": e.machine or "",
            "branch": e.branch or "",
            "cwd": (e.cwd or "").strip(),
            "path": rel_path(e.path),
            "tool": e.tool,
            "command": e.command,
        },
        policy,
    )


def rel_path(path: str | None) -> str | None:
    if path is None:
        return None
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path
