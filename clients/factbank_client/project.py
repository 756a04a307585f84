"""The project key: the same repository on two machines must give the same key.

It is the normalised URL of the `origin` remote (`github.com/acme/api` for
`git@github.com:acme/api.git`, `https://github.com/acme/api` or
`ssh://git@github.com/acme/api.git`), else the repository root's directory name, else None
outside a repository. Read from `.git/config` directly (no `git` subprocess) so hooks stay fast.
"""

from __future__ import annotations

import os
import stat

from factbank_client.paths import mode_of

TYPE_CHECKING = False  # the hooks run this module at every prompt: no typing, no pathlib
if TYPE_CHECKING:
    from pathlib import Path

# Strings and os.path, not pathlib, re or configparser: the prompt and session-start hooks ask
# for the project key and the repository root at every run, and those three modules cost a
# fresh `python -I -S` 14.5, 7.6 and 11.3 ms of CPU (medians of 21 on the 2-core box, the bare
# interpreter 11.1 ms in the same sitting). What each function answers is what the pathlib /
# configparser / regex versions answered (tests/unit/test_hook_imports.py compares them).


def _resolve(path: str) -> str:
    """Path(path).resolve(): os.path.realpath, and a symlink loop is a RuntimeError."""
    real = os.path.realpath(path)
    try:
        os.stat(real)
    except OSError as exc:
        import errno

        if exc.errno == errno.ELOOP:
            raise RuntimeError(f"Symlink loop from {real!r}") from None
    return real


def root_dir(start: str) -> str | None:
    """The repository holding `start` (resolved), as a string: repo_root without pathlib."""
    d = _resolve(start)
    while True:
        if mode_of(os.path.join(d, ".git")) is not None:
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def repo_root(start: Path) -> Path | None:
    root = root_dir(os.fspath(start))
    if root is None:
        return None
    from pathlib import Path

    return Path(root)


def _is_file(path: str) -> bool:
    mode = mode_of(path)
    return mode is not None and stat.S_ISREG(mode)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _git_dir(root: str) -> str:
    dot = os.path.join(root, ".git")
    if _is_file(dot):  # worktree or submodule: "gitdir: <path>"
        target = _read(dot).strip().removeprefix("gitdir:").strip()
        gitdir = _resolve(os.path.join(root, target))
        common = os.path.join(gitdir, "commondir")
        if _is_file(common):
            return _resolve(os.path.join(gitdir, _read(common).strip()))
        return gitdir
    return dot


def _scp(url: str) -> tuple[str, str] | None:
    """(host, path) of an scp-like remote, `[user@]host:path` (the pattern
    `^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$`), else None."""
    at = url.find("@")
    starts = [at + 1] if at > 0 and "/" not in url[:at] else []
    for start in (*starts, 0):
        ends = [i for i in (url.find(":", start), url.find("/", start)) if i >= 0]
        end = min(ends, default=-1)
        path = url[end + 1:]
        if end > start and url[end] == ":" and not path.startswith("//"):
            path = path[:-1] if path.endswith("\n") else path  # `$` passes a final LF
            if path and "\n" not in path:
                return url[start:end], path
    return None


def normalise_remote(url: str) -> str:
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        host_part, _, path = rest.partition("/")
        host = host_part.rsplit("@", 1)[-1].split(":")[0]
    elif m := _scp(url):
        host, path = m
    else:
        return url.rstrip("/").removesuffix(".git").lower()
    path = path.strip("/").removesuffix(".git")
    return f"{host.lower()}/{path.lower()}" if host else path.lower()


def _git_config(root: str) -> tuple[dict[str, dict[str, str]], dict[str, str]] | None:
    """The sections and the DEFAULT section of the repository's git config, read as
    `configparser.RawConfigParser(strict=False).read(path, encoding="utf-8")` reads it
    (`#`/`;` comment lines, `=` or `:`, indented continuation lines, the last of a repeated
    key); None where it raises configparser.Error (a line before any section, a line that is
    not `key = value`). A file that cannot be opened is an empty one, as there."""
    sections: dict[str, dict[str, list[str]]] = {}
    defaults: dict[str, list[str]] = {}
    current: dict[str, list[str]] | None = None
    option: str | None = None
    indent = 0
    failed = False
    try:
        with open(os.path.join(_git_dir(root), "config"), encoding="utf-8") as fh:
            for line in fh:
                value = line.strip()
                if not value or value[0] in "#;":
                    if not value and current is not None and option:
                        current[option].append("")
                    continue
                level = len(line) - len(line.lstrip())
                if current is not None and option and level > indent:
                    current[option].append(value)
                    continue
                indent = level
                close = value.rfind("]")
                if value[0] == "[" and close >= 2:
                    name = value[1:close]
                    current = defaults if name == "DEFAULT" else sections.setdefault(name, {})
                    option = None
                elif current is None:
                    return None  # MissingSectionHeaderError
                else:
                    cut = min((i for i in (value.find("="), value.find(":")) if i >= 0),
                              default=-1)
                    if cut < 0:
                        failed = True  # ParsingError, raised once the file is read
                        continue
                    option = value[:cut].rstrip().lower()
                    failed = failed or not option  # "= x": an error, the value kept
                    current[option] = [value[cut + 1:].strip()]
    except OSError:
        return {}, {}
    if failed:
        return None

    def joined(options: dict[str, list[str]]) -> dict[str, str]:
        return {k: "\n".join(v).rstrip() for k, v in options.items()}

    return {n: joined(o) for n, o in sections.items()}, joined(defaults)


def _remote_urls(root: str) -> list[str] | None:
    """Each `remote` section's url ("" where none), origin's first; None when unreadable."""
    parsed = _git_config(root)
    if parsed is None:
        return None
    sections, defaults = parsed
    names = sorted((n for n in sections if n.startswith("remote ")),
                   key=lambda n: n != 'remote "origin"')
    return [sections[n].get("url", defaults.get("url", "")) for n in names]


def origin_url(root: Path | str) -> str | None:
    return next((u for u in _remote_urls(os.fspath(root)) or () if u), None)


def project_key(cwd: str | Path | None = None) -> str | None:
    root = root_dir(os.fspath(cwd) if cwd else os.getcwd())
    if root is None:
        return None
    url = origin_url(root)
    return normalise_remote(url) if url else os.path.basename(root).lower()


def remotes(cwd: str | Path | None = None) -> list[str]:
    """Every remote of the repository here, normalised and sorted (the rule gate's "unrelated
    projects" share none: a fork's clone has the upstream as a remote). [] outside a repo."""
    root = root_dir(os.fspath(cwd) if cwd else os.getcwd())
    if root is None:
        return []
    urls = {normalise_remote(u) for u in _remote_urls(root) or ()}
    return sorted(u for u in urls if u)[:20]


def confirm_evidence(cwd: str | Path | None = None, project: str | None = None) -> dict:
    """What a confirm carries for the rule gate: this project's key and its remotes."""
    key = project or project_key(cwd)
    if not key:
        return {}
    return {"project": key, "remotes": remotes(cwd)}
