"""The client's redaction: what the client stores or shows holds no secret the server would
have redacted.

A dispatch's run files (the task, the harness's messages, commands and their output, errors)
are written on this machine and shown on the dashboard, and the server never sees most of
them; a redaction weaker than the server's left 12 of 15 secret kinds of a task in them. So:

1. **The server's redaction itself**, in-process, whenever it can be imported
   (`factbank.redact.redaction.redact_text`: the `server` extra is installed, as on every machine
   that runs `factbank up`). Then the client's result *is* the server's, by construction
   (tests/unit/test_client_redact.py checks it on both secret corpora in evals/sets/secrets).
   Imported lazily, on the first text, so the light client's modules never import server code
   (tests/integration/test_light_install.py); the first call costs ~2 s (the scanner's rules).
2. **A strict fallback** for the light client (no detect-secrets, no Kingfisher): the shapes of
   the common credentials, every value a secret word introduces (``NAME=value``, ``password:
   x``, "the password is x", "password x", 密码是 x), URL passwords, PEM blocks, and every
   random-looking token of 16+ characters, hex or not. It errs towards removing: a local log
   with a commit id masked costs little, a key kept costs a rotation. Measured on the two
   corpora against the server (`python -m factbank_evals.redaction_recall --client`): share
   of the secrets the server removes that the fallback removes too, and look-alikes kept.

Either way the exact tokens of the client's own config (`factbank login`'s) are removed first:
a harness echoes them when an agent runs `cat ~/.config/factbank/config.toml` or `env`.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from factbank_client.settings import settings

MARK = "[REDACTED:{}]"

_SECRET_WORDS = (r"(?:password|passwd|passphrase|pwd|pass|secret|token|api[_ -]?key|access[_ -]?key"
                 r"|private[_ -]?key|secret[_ -]?key|client[_ -]?secret|credentials?|auth|key"
                 r"|bearer|apikey|口令|密码|密碼|密钥|秘钥|私钥|令牌|凭证|凭据)")
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rx)) for kind, rx in (
        ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*"
                        r"PRIVATE KEY-----|\Z)"),
        ("factbank_token", r"\bfb_[A-Za-z0-9_-]{20,}"),
        ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
        ("slack_token", r"\bxox[abeprs]-[A-Za-z0-9-]{10,}"),
        ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
        ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
        ("stripe_key", r"\b[rsp]k_(?:live|test)_[0-9A-Za-z]{10,}"),
        ("npm_token", r"\bnpm_[A-Za-z0-9]{30,}"),
        ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
        ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        ("url_password", r"(?<=://)[^\s/:@]*:[^\s/@]+(?=@)"),
        ("user_flag", r"(?<=\s)(?:-u|--user)\s+['\"]?[^\s'\"]*:[^\s'\"]+"),
        ("bearer", r"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"),
        # A secret word, then `=`/`:`/"is"/"是"/nothing, then the value (quoted or one token).
        ("assignment", r"(?i)(?<![A-Za-z])[\w.-]*" + _SECRET_WORDS + r"[\w.-]*[\"']?"
                       r"(?:\s*(?:[!=]==?|:=|=>|[:=：])\s*@?|\s+(?:is|was|are|为|是)\s+"
                       r"|\s*(?:是|为)\s*|\s+)(?:(?P<q>[\"'`]))?(?P<v>(?(q)[^\"'`\n]{4,200}|[^\s\"'`,;，。；]{4,}))"),
    ))
# Values a secret word may introduce that are not secrets (a placeholder, a word).
_PLACEHOLDER = re.compile(r"(?i)^(?:\$\{?\w+\}?|%\w+%|\{\{.*\}\}|<[^>]*>|\*+|x{3,}|\.{3,}"
                          r"|\[REDACTED:\w+\]|(?:none|null|true|false|required|optional)$)")
_TOKEN = re.compile(r"[A-Za-z0-9_+/=.~-]{16,}")


def config_tokens() -> tuple[str, ...]:
    """The tokens of the client's config and environment (longest first). Read again when the
    environment's tokens or the config file change (a `login` in a long-lived dashboard)."""
    # config imports this module back, lazily, for its URL errors (a circle kept on purpose:
    # config.normalize_url says what it saves every hook, 20 ms of CPU).
    from factbank_client import config

    path = config.config_path()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = None
    return _tokens(settings.token, settings.team_token, str(path), stamp)


@functools.lru_cache(maxsize=8)
def _tokens(env: str | None, team: str | None, path: str, stamp: int | None) -> tuple[str, ...]:
    found = {t for t in (env, team) if t}
    if stamp is not None:
        try:
            from factbank_client import config

            found.update(t for t in config.load(Path(path)).tokens.values() if t)
        except Exception:  # an unreadable config has no tokens to scrub
            pass
    return tuple(sorted((t for t in found if len(t) >= 8), key=len, reverse=True))


@functools.cache
def server_redaction() -> Callable[[str], str] | None:
    """The server's `redact_text` when its extra is installed, else None (the fallback)."""
    if settings.client_redaction == "fallback":
        return None  # forced, to measure and test the fallback on a full install
    try:
        from factbank.redact.redaction import redact_text
    except ImportError:
        return None
    return lambda text: redact_text(text, "dispatch")[0]


def redact(text: str) -> str:
    """`text` with every secret replaced by [REDACTED:kind]: the server's redaction when it is
    installed, else the strict fallback; the config's tokens first, either way."""
    if not text:
        return text
    for token in config_tokens():
        if token in text:
            text = text.replace(token, MARK.format("factbank_token"))
    server = server_redaction()
    return server(text) if server is not None else fallback(text)


def fallback(text: str) -> str:
    """The light client's redaction (module docstring, 2)."""
    for kind, rx in PATTERNS:
        if kind == "assignment":
            text = rx.sub(_assignment, text)
        else:
            text = rx.sub(MARK.format(kind), text)
    return _TOKEN.sub(lambda m: MARK.format("high_entropy") if _random(m.group()) else
                      m.group(), text)


def _assignment(m: re.Match[str]) -> str:
    value = m.group("v")
    bare = not m.group("q") and not re.search(r"[:=：]|\bis\b|\bwas\b|\bare\b|是|为",
                                              m.group()[: m.start("v") - m.start()])
    if _PLACEHOLDER.match(value) or (bare and not _secretish(value)):
        return m.group()  # "password policy", "token bucket", ${DB_PASSWORD}
    if not m.group("q") and not bare and value.isalpha() and value.islower() and len(value) < 8:
        return m.group()  # "the token is expired"
    return m.group()[: m.start("v") - m.start()] + MARK.format("assignment") + m.group()[
        m.end("v") - m.start():]


def _secretish(value: str) -> bool:
    """A bare value after a secret word (no `=`, no "is"): it must look like one."""
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                   any(c.isdigit() for c in value), any(not c.isalnum() for c in value)))
    return (len(value) >= 6 and classes >= 3) or (len(value) >= 16 and classes >= 2)


def _random(token: str) -> bool:
    """A 16+ character token that is not a word, a path or a dotted name: letters and digits
    mixed, and close to the entropy of a random string of its length."""
    core = token.strip("=.-_~")
    if len(core) < 16 or ("/" in core and all(p.isalpha() or not p for p in re.split(
            r"[/._-]", core))):
        return False
    digits, lower, upper = (bool(re.search(rx, core)) for rx in (r"\d", "[a-z]", "[A-Z]"))
    if not ((digits and (lower or upper)) or (lower and upper and len(core) >= 20)):
        return False
    hexish = all(c in "0123456789abcdefABCDEF" for c in core)
    charset = 16 if hexish else 26 * lower + 26 * upper + 10 * digits + 4
    counts = Counter(core)
    entropy = -sum(n / len(core) * math.log2(n / len(core)) for n in counts.values())
    return entropy >= 0.7 * math.log2(min(len(core), charset))
