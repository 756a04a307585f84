"""Fixtures shared by the unit tests: the loopback stand-in of the recall service that the
hook tests run the hook process against (tests/unit/hook_standins.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.hook_standins import StandIn


@pytest.fixture
def standin() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.close()
