"""Client configuration: one TOML file names the services and one token per bank.

    # ~/.config/factbank/config.toml
    url = "http://100.64.0.5:8701"          # ingest; recall defaults to the next port
    recall_url = "http://100.64.0.5:8702"   # optional
    team_categories = ["decisions", "people"]  # writes in these go to the team bank
    [banks.personal]
    token = "fb_..."
    [banks.team]
    token = "fb_..."

Environment overrides: FACTBANK_CONFIG (the file), FACTBANK_URL, FACTBANK_RECALL_URL,
FACTBANK_TOKEN (a token for the `personal` bank), FACTBANK_TEAM_TOKEN (for `team`).
Standard library only: the hooks import this on every prompt and must start fast.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from factbank_client.settings import settings

DEFAULT_URL = "http://127.0.0.1:8701"
PERSONAL = "personal"
TEAM = "team"


def config_path() -> Path:
    explicit = settings.config
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "factbank" / "config.toml"


def normalize_url(raw: str, what: str = "url") -> str:
    """A service URL as the config keeps it: `http://` when no scheme was typed
    (`--url 127.0.0.1:28701` was saved as is, and the recall URL derived from it became
    `//127.0.0.1:81/127.0.0.1:28701`), a bare port meaning this machine, scheme and host in
    lower case, no trailing slash. Raises ValueError naming `what` for anything that cannot
    be a factbank service: another scheme, no host or a malformed one, a bad port,
    credentials, a query. The input is echoed redacted (a token pasted into --url)."""
    import re
    from urllib.parse import urlsplit, urlunsplit

    def bad(why: str, echo: bool = True) -> ValueError:
        if not echo:
            return ValueError(f"{what}: {why}")
        # A circle with redact (which reads this module for the config's own tokens), kept
        # lazy on both sides on purpose: every hook loads this module, and importing redact's
        # patterns at load time would cost each hook process for an error it almost never
        # prints; redact needs config only when it scrubs.
        from factbank_client.redact import redact

        return ValueError(f"{what} {redact(raw)!r}: {why}")

    text = (raw or "").strip()
    if not text:
        raise ValueError(f"{what} is empty")
    if any(c.isspace() for c in text):
        raise bad("contains a space")
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if "://" not in text:
        text = "http://" + text.lstrip("/")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise bad("the scheme must be http:// or https://")
    if "@" in parts.netloc:
        raise bad("no user or password in the URL (the token goes in --token)", echo=False)
    host = parts.hostname or ""
    if not host:
        raise bad("names no host")
    if ":" not in host and not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", host):
        raise bad("the host may hold letters, digits, '-' and '.' only")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise bad("the port must be a number from 1 to 65535")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise bad("a service URL has no ?query or #fragment")
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def _lenient(url: str) -> str:
    """`normalize_url`, or the text as it is when it cannot be one (`factbank doctor` says
    why; a hook must not fail on it)."""
    try:
        return normalize_url(url)
    except ValueError:
        return url


def _next_port(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    port = (parts.port or (443 if parts.scheme == "https" else 80)) + 1
    host = parts.hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


class ClientConfig:
    """A plain class, not a dataclass: `dataclasses` imports `inspect`, ~30 ms on every hook."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        recall_url: str = "",
        tokens: dict[str, str] | None = None,
        team_categories: list[str] | None = None,
        path: Path | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.recall_url = (recall_url or _next_port(self.url)).rstrip("/")
        self.tokens = dict(tokens or {})
        self.team_categories = list(team_categories or [])
        self.path = path

    def __repr__(self) -> str:  # never print tokens
        return f"ClientConfig(url={self.url!r}, recall_url={self.recall_url!r}, " \
               f"banks={self.banks!r})"

    @property
    def banks(self) -> list[str]:
        """Configured bank labels, personal first."""
        return sorted(self.tokens, key=lambda b: (b != PERSONAL, b != TEAM, b))

    def write_bank(self, category: str | None = None, bank: str | None = None) -> str:
        """Where a write goes: the named bank, the team bank for team categories, else
        personal (or the only bank configured)."""
        if bank:
            if bank not in self.tokens:
                raise KeyError(f"no token configured for bank {bank!r}")
            return bank
        if category and category in self.team_categories and TEAM in self.tokens:
            return TEAM
        if PERSONAL in self.tokens:
            return PERSONAL
        if len(self.tokens) == 1:
            return next(iter(self.tokens))
        raise KeyError("no personal bank configured; pass a bank explicitly")


def load(path: Path | None = None) -> ClientConfig:
    """The config file (if any) with environment overrides applied."""
    path = path or config_path()
    data: dict = {}
    if path.is_file():
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    tokens = {name: str(b.get("token", "")) for name, b in (data.get("banks") or {}).items()
              if isinstance(b, dict) and b.get("token")}
    if settings.token:
        tokens[PERSONAL] = settings.token
    if settings.team_token:
        tokens[TEAM] = settings.team_token
    recall_url = settings.recall_url or data.get("recall_url") or ""
    return ClientConfig(
        url=_lenient(settings.url or data.get("url") or DEFAULT_URL),
        recall_url=_lenient(recall_url) if recall_url else "",
        tokens=tokens,
        team_categories=list(data.get("team_categories") or []),
        path=path,
    )


def save_login(url: str, token: str, bank: str = PERSONAL, *, recall_url: str | None = None,
               path: Path | None = None) -> Path:
    """Record a bank's token (and the URLs) in the config file, keeping its comments/order."""
    import tomlkit

    from factbank_client import safefs

    path = path or config_path()
    data = safefs.read_own(path)  # never through a link (it is then replaced by a file)
    doc = tomlkit.parse(data.decode("utf-8")) if data is not None else tomlkit.document()
    doc["url"] = url.rstrip("/")
    if recall_url:
        doc["recall_url"] = recall_url.rstrip("/")
    banks = doc.get("banks")
    if banks is None:
        banks = tomlkit.table(is_super_table=True)
        doc["banks"] = banks
    entry = banks.get(bank)
    if entry is None:
        entry = tomlkit.table()
        banks[bank] = entry
    entry["token"] = token
    write_private(path, tomlkit.dumps(doc))
    return path


def write_private(path: Path, text: str) -> None:
    """Atomically replace `path` with `text`, readable by its owner only from the first byte
    (safefs.write: a fresh 0600 temp file renamed over it; a link there is refused)."""
    from factbank_client import safefs

    safefs.write(path, text, private=True)


def open_private(path: str | Path):
    """Open `path` for writing text, 0600 before anything is written: a new file is created
    0600, an existing one is truncated and set to 0600 first (an export holds every fact)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:  # not our file (or a FIFO/device): its mode is its owner's
        pass
    return os.fdopen(fd, "w", encoding="utf-8")
