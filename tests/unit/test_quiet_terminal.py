"""`up`'s terminal shows the banner and problems, not access logs; containers
keep every line on stdout; the dashboard's terminal gets no httpx INFO lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from factbank.observability import access_log, configure_logging
from factbank.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in root.handlers:
        if h not in handlers:
            h.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_by_default_requests_go_to_the_file_and_problems_to_the_terminal(
        tmp_path, capsys, root_logging):
    settings = Settings(home=tmp_path)
    path = configure_logging(settings)
    assert path == tmp_path / "logs" / "factbank.log" == settings.log_file
    access_log.info("request", extra={"route": "/readyz", "status": 200})
    logging.getLogger("factbank.web").warning("the embedder is down")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["factbank: WARNING factbank.web: the embedder is down"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["msg"], r.get("route")) for r in lines] == [
        ("request", "/readyz"), ("the embedder is down", None)]
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_containers_get_every_line_on_their_stream(tmp_path, capsys, root_logging, stream):
    assert configure_logging(Settings(home=tmp_path, log=stream)) is None
    access_log.info("request", extra={"route": "/healthz"})
    captured = capsys.readouterr()
    line = json.loads(captured.out if stream == "stdout" else captured.err)
    assert line["route"] == "/healthz" and line["logger"] == "factbank.access"
    assert not (tmp_path / "logs").exists()


def test_an_unknown_log_destination_is_refused(monkeypatch):
    monkeypatch.setenv("FACTBANK_LOG", "syslog")
    with pytest.raises(ValueError, match="FACTBANK_LOG must be file, stdout or stderr"):
        Settings.from_env()


def test_compose_and_the_image_keep_logging_to_stdout():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for name in ("migrate", "ingest", "recall"):
        env = compose["services"][name].get("environment") or {}
        assert env.get("FACTBANK_LOG") == "stdout", name
    assert "FACTBANK_LOG=stdout" in (ROOT / "Dockerfile").read_text()


def test_the_dashboard_leaves_the_root_logger_alone(root_logging):
    """Litestar's default logging config set the root logger to INFO with a handler: each
    call to the services printed an httpx line in the dashboard's terminal."""
    from factbank_client.config import ClientConfig
    from factbank_client.dashboard import app as dashboard_app
    from factbank_client.dashboard.security import Secrets

    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    dashboard_app.create(ClientConfig(tokens={"personal": "fb_x"}), Secrets(), 8765)
    assert (list(root.handlers), root.level) == before
