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
Standard library only: the hooks import this on every prompt and must start fast. So the
hooks' path (`load()`) loads neither `pathlib` (14.5 ms of CPU in a fresh `python -I -S`, with
the `re`, `fnmatch` and `urllib.parse` it brings), nor `tomllib` (20.5 ms; simpletoml.py), nor
`urllib.parse`/`re` for a URL already in normal form (`_normal`); medians of 21 on the 2-core
box, the bare interpreter 11.1 ms in the same sitting. `Path` is built where one is returned.
"""

from __future__ import annotations

import os

from factbank_client import simpletoml
from factbank_client.settings import settings

TYPE_CHECKING = False  # not `typing`'s (5 ms): the annotations only
if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8701"
PERSONAL = "personal"
TEAM = "team"


def config_path() -> Path:
    from pathlib import Path

    return Path(_config_file())


def _config_file() -> str:
    """config_path() as a string, without pathlib (the hooks'); Path(it) is config_path()."""
    explicit = settings.config
    if explicit:
        path = os.path.expanduser(explicit)
        return path.rstrip("/") or path  # Path drops a trailing slash
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "factbank", "config.toml")


def _is_file(path: str) -> bool:
    """Path(path).is_file(), without pathlib."""
    import stat

    from factbank_client.paths import mode_of

    mode = mode_of(path)
    return mode is not None and stat.S_ISREG(mode)


_HOST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_PATH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~/-")


def _normal(text: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of a URL that `normalize_url` returns unchanged (lower-case
    `http(s)://host[:port][/path]`, no trailing slash, plain characters only), else None: such
    a URL needs neither `urllib.parse` nor `re` (the hooks read two at every prompt)."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    netloc, slash, path = rest.partition("/")
    host, colon, port = netloc.partition(":")
    path = slash + path
    if (not host or not set(host) <= _HOST or host[0] in ".-" or host[-1] in ".-"
            or (colon and not (port.isdigit() and port.isascii() and port[0] != "0"
                               and int(port) <= 65535))
            or (path and (path[-1] == "/" or not set(path) <= _PATH))):
        return None
    return scheme, host, int(port) if colon else None, path


def normalize_url(raw: str, what: str = "url") -> str:
    """A service URL as the config keeps it: `http://` when no scheme was typed
    (`--url 127.0.0.1:28701` was saved as is, and the recall URL derived from it became
    `//127.0.0.1:81/127.0.0.1:28701`), a bare port meaning this machine, scheme and host in
    lower case, no trailing slash. Raises ValueError naming `what` for anything that cannot
    be a factbank service: another scheme, no host or a malformed one, a bad port,
    credentials, a query. The input is echoed redacted (a token pasted into --url)."""
    if raw and _normal(raw) is not None:
        return raw  # already normal: what the code below would return, without its imports
    import re
    from urllib.parse import urlsplit, urlunsplit

    def bad(why: str, echo: bool = True) -> ValueError:
        if not echo:
            return ValueError(f"{what}: {why}")
        # A circle with redact (which reads this module for the config's own tokens), kept
        # on purpose and lazy on both sides: every hook loads this module, and importing
        # redact at its top would cost each hook process 20.2 ms of CPU (a fresh `python -I
        # -S`: config alone +3.3 ms, config and redact +23.5 ms over the bare interpreter's
        # 10.5; median of 21, load 19) for an error it almost never prints. Redact needs
        # config only when it scrubs. Breaking it would mean the echo here without the
        # config's own tokens scrubbed, or those tokens read twice.
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
    normal = _normal(url)
    if normal is not None:  # as below, without urllib.parse
        scheme, host, port, path = normal
        return f"{scheme}://{host}:{(port or (443 if scheme == 'https' else 80)) + 1}{path}"
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
        path: Path | str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.recall_url = (recall_url or _next_port(self.url)).rstrip("/")
        self.tokens = dict(tokens or {})
        self.team_categories = list(team_categories or [])
        self._path = None if path is None else os.fspath(path)

    @property
    def path(self) -> Path | None:
        """The config file read (a Path built when asked: the hooks never ask)."""
        if self._path is None:
            return None
        from pathlib import Path

        return Path(self._path)

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
    file = os.fspath(path) if path else _config_file()
    data: dict = {}
    if _is_file(file):
        with open(file, "rb") as fh:
            data = simpletoml.load(fh)
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
        path=file,
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
