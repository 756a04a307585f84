"""Scrub secrets from what a dispatch writes to its run files or echoes.

The client has no redaction of its own: the server's (`factbank.write.redaction`, gitleaks
rules, detect-secrets, kingfisher) is server-side and heavy, and the client must not import
it. A run's log is local (files 0600 in a 0700 directory) but it is shown in a browser and
turned into handoffs, so two cheap passes run over every string before it is stored:

1. the exact tokens of the client's own config (`factbank login`'s), which a harness may echo
   back when an agent runs `cat ~/.config/factbank/config.toml` or `env`;
2. the shapes of the common credentials an agent's commands print (factbank's `fb_` tokens,
   provider API keys, GitHub/GitLab/Slack tokens, AWS key ids, `Bearer ...`, private key
   blocks, `password=...`), replaced by `[REDACTED:kind]` as the server writes it.

What leaves the machine (a handoff, the timeline) is redacted again by the server.
"""

from __future__ import annotations

import functools
import os
import re

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rx)) for kind, rx in (
        ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*"
                        r"PRIVATE KEY-----|\Z)"),
        ("factbank_token", r"\bfb_[A-Za-z0-9_-]{20,}"),
        ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        ("openai_key", r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}"),
        ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
        ("slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
        ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
        ("bearer", r"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{16,}"),
        ("password", r"(?i)(?<=password=)[^\s&'\"]{4,}|(?<=PASSWORD=)[^\s&'\"]{4,}"),
    ))


@functools.cache
def config_tokens() -> tuple[str, ...]:
    """The tokens of the client's config and environment (longest first), read once."""
    found: set[str] = set()
    for var in ("FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN"):
        if os.environ.get(var):
            found.add(os.environ[var])
    try:
        from factbank_client import config

        found.update(t for t in config.load().tokens.values() if t)
    except Exception:  # an unreadable config has no tokens to scrub
        pass
    return tuple(sorted((t for t in found if len(t) >= 8), key=len, reverse=True))


def redact(text: str) -> str:
    """`text` with the config's tokens and credential shapes replaced by [REDACTED:kind]."""
    if not text:
        return text
    for token in config_tokens():
        if token in text:
            text = text.replace(token, "[REDACTED:factbank_token]")
    for kind, rx in PATTERNS:
        text = rx.sub(f"[REDACTED:{kind}]", text)
    return text
