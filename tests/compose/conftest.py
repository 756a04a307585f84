"""The compose stack, for real: engine, images, `docker compose up --wait`, then the tests.

These tests run only when selected: `pytest -m compose tests/compose` (what
tests/compose/run and CI do) or FACTBANK_COMPOSE=1. A plain `pytest` skips them, saying so:
they start a Docker engine and build images, minutes of work on a first run.

They skip with the reason only where no engine can be had: no engine answers and dockerd
cannot be started (not root, no apt-get). As root with apt-get, a failure to install or start
the engine is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compose import engine as engine_mod
from tests.compose.stack import Stack, use_public_images, write_env_file

ROOT = engine_mod.ROOT
HERE = Path(__file__).resolve().parent
MAIN_BIND = os.environ.get("FACTBANK_COMPOSE_BIND", "127.0.0.73")
RESTORE_BIND = os.environ.get("FACTBANK_COMPOSE_RESTORE_BIND", "127.0.0.74")
REPORT: dict[str, object] = {}


def _selected(config: pytest.Config) -> bool:
    expr = (config.option.markexpr or "").replace(" ", "")
    return os.environ.get("FACTBANK_COMPOSE") == "1" or (
        "compose" in expr and "notcompose" not in expr
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    selected = _selected(config)
    skip = pytest.mark.skip(
        reason="the compose stack tests run when selected: pytest -m compose tests/compose "
        "(tests/compose/run) or FACTBANK_COMPOSE=1"
    )
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.compose)
            if not selected:
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not REPORT:
        return
    terminalreporter.section("compose stack figures")
    for key, value in REPORT.items():
        terminalreporter.write_line(f"{key}: {value}")
    out = os.environ.get("FACTBANK_COMPOSE_REPORT")
    if out:
        Path(out).write_text(json.dumps(REPORT, indent=2, default=str) + "\n")


@pytest.fixture(scope="session")
def report() -> dict[str, object]:
    return REPORT


@pytest.fixture(scope="session")
def engine() -> Iterator[engine_mod.Engine]:
    start = time.monotonic()
    with engine_mod.session_lock():
        waited = time.monotonic() - start
        if waited > 5:
            REPORT["waited for another compose session"] = f"{waited:.0f} s"
        yield from _engine(time.monotonic())


def _engine(start: float) -> Iterator[engine_mod.Engine]:
    try:
        eng = engine_mod.start()
    except engine_mod.NoEngine as exc:
        pytest.skip(f"no Docker engine can be started here: {exc}")
    REPORT["engine"] = (
        f"{'dockerd started (' + eng.storage + ')' if eng.started else 'existing engine'} "
        f"at {eng.host} in {time.monotonic() - start:.1f} s"
    )
    try:
        yield eng
    finally:
        eng.prune()
        eng.stop()


@pytest.fixture(scope="session")
def images(engine: engine_mod.Engine) -> None:
    """The local images (ops/local-images), then the project image (`docker compose build`)."""
    if use_public_images():
        return
    start = time.monotonic()
    r = subprocess.run(
        [str(ROOT / "ops" / "local-images")],
        env={**engine.env, "DOCKER": engine.client},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, f"ops/local-images failed:\n{r.stderr[-4000:]}"
    REPORT["local images (ops/local-images)"] = f"{time.monotonic() - start:.0f} s"


def _stack(engine, tmp_path_factory, project: str, bind: str) -> Stack:
    env_file = write_env_file(tmp_path_factory.mktemp(project) / "factbank.env")
    stack = Stack(engine, project, bind, env_file)
    stack.compose("down", "--volumes", "--timeout", "5", check=False)  # a crashed run's
    return stack


@pytest.fixture(scope="session")
def stack(engine, images, tmp_path_factory) -> Iterator[Stack]:
    """The main stack, built and started once for the session, removed with its volumes."""
    stack = _stack(engine, tmp_path_factory, "fbci", MAIN_BIND)
    start = time.monotonic()
    # One service builds the image all four app services share (building all four would
    # export the same image four times).
    stack.compose("build", "migrate", timeout=1800)
    REPORT["project image (docker compose build)"] = f"{time.monotonic() - start:.0f} s"
    try:
        REPORT["docker compose up --wait (fresh volumes)"] = f"{stack.up():.0f} s"
        yield stack
    finally:
        stack.compose("logs", "--no-color", "--tail", "30", check=False)
        stack.down(volumes=True)


@pytest.fixture(scope="session")
def fresh_stack_factory(engine, images, stack, tmp_path_factory):
    """A second, empty stack (another project and bind address), for restores."""
    made: list[Stack] = []

    def make() -> Stack:
        s = _stack(engine, tmp_path_factory, "fbci-restore", RESTORE_BIND)
        made.append(s)
        return s

    yield make
    for s in made:
        s.down(volumes=True)
