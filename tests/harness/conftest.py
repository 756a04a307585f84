"""Fixtures for the real-harness tests (marker ``harness``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
