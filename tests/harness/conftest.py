"""Fixtures for the real-harness tests (marker ``harness``): the binaries, the fake model, a
throwaway HOME and project, and the real services (`stack`, `services`; tests/harness/e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .e2e import Services, Stack, running_stack
from .fake_model import FakeModel
from .npm import Harnesses, HarnessUnavailable, ensure_harnesses


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "harness: runs a real agent harness from npm")


@pytest.fixture(scope="session")
def harnesses() -> Harnesses:
    """The installed binaries; skips (never fails) when npm/node/the registry is unavailable."""
    try:
        return ensure_harnesses()
    except HarnessUnavailable as exc:
        pytest.skip(f"agent harnesses unavailable: {exc}")


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    """One `factbank up` for the whole session, warmed: it used to be one per test module
    (seven), each start and model load costing seconds to tens of seconds."""
    with running_stack() as running:
        yield running


@pytest.fixture(scope="module")
def services(stack: Stack, request: pytest.FixtureRequest) -> Services:
    """A fresh personal bank on the session's services for each test module: what one module
    stores, searches or puts on its timeline no other module sees."""
    return stack.bank(request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_"))


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as fake:
        yield fake


@pytest.fixture
def harness_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def harness_cwd(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd
