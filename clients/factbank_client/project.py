"""The project key: the same repository on two machines must give the same key.

It is the normalised URL of the `origin` remote (`github.com/acme/api` for
`git@github.com:acme/api.git`, `https://github.com/acme/api` or
`ssh://git@github.com/acme/api.git`), else the repository root's directory name, else None
outside a repository. Read from `.git/config` directly (no `git` subprocess) so hooks stay fast.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")


def repo_root(start: Path) -> Path | None:
    for d in (start.resolve(), *start.resolve().parents):
        if (d / ".git").exists():
            return d
    return None


def _git_dir(root: Path) -> Path:
    dot = root / ".git"
    if dot.is_file():  # worktree or submodule: "gitdir: <path>"
        target = dot.read_text("utf-8").strip().removeprefix("gitdir:").strip()
        gitdir = (root / target).resolve()
        common = gitdir / "commondir"
        if common.is_file():
            return (gitdir / common.read_text("utf-8").strip()).resolve()
        return gitdir
    return dot


def normalise_remote(url: str) -> str:
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        host_part, _, path = rest.partition("/")
        host = host_part.rsplit("@", 1)[-1].split(":")[0]
    elif m := _SCP.match(url):
        host, path = m.group(1), m.group(2)
    else:
        return url.rstrip("/").removesuffix(".git").lower()
    path = path.strip("/").removesuffix(".git")
    return f"{host.lower()}/{path.lower()}" if host else path.lower()


def origin_url(root: Path) -> str | None:
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(_git_dir(root) / "config", encoding="utf-8")
    except (configparser.Error, OSError):
        return None
    sections = [s for s in parser.sections() if s.startswith("remote ")]
    sections.sort(key=lambda s: s != 'remote "origin"')
    for section in sections:
        url = parser.get(section, "url", fallback=None)
        if url:
            return url
    return None


def project_key(cwd: str | Path | None = None) -> str | None:
    root = repo_root(Path(cwd or Path.cwd()))
    if root is None:
        return None
    url = origin_url(root)
    return normalise_remote(url) if url else root.name.lower()


def remotes(cwd: str | Path | None = None) -> list[str]:
    """Every remote of the repository here, normalised and sorted (the rule gate's "unrelated
    projects" share none: a fork's clone has the upstream as a remote). [] outside a repo."""
    root = repo_root(Path(cwd or Path.cwd()))
    if root is None:
        return []
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(_git_dir(root) / "config", encoding="utf-8")
    except (configparser.Error, OSError):
        return []
    urls = {normalise_remote(parser.get(s, "url", fallback="") or "")
            for s in parser.sections() if s.startswith("remote ")}
    return sorted(u for u in urls if u)[:20]


def confirm_evidence(cwd: str | Path | None = None, project: str | None = None) -> dict:
    """What a confirm carries for the rule gate: this project's key and its remotes."""
    key = project or project_key(cwd)
    if not key:
        return {}
    return {"project": key, "remotes": remotes(cwd)}
