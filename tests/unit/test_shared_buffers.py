"""FACTBANK_PG_SHARED_BUFFERS, as `factbank up` reads it (the embedded Postgres's cache)."""

from __future__ import annotations

import os

import pytest

from factbank.runtime.embedded import (
    AUTO_SHARED_BUFFERS_MAX,
    AUTO_SHARED_BUFFERS_MIN,
    shared_buffers_bytes,
)
from factbank.settings import Settings


def test_auto_is_an_eighth_of_memory_within_bounds() -> None:
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    got = shared_buffers_bytes("auto")
    assert got == max(AUTO_SHARED_BUFFERS_MIN, min(AUTO_SHARED_BUFFERS_MAX, memory // 8))
    assert AUTO_SHARED_BUFFERS_MIN <= got <= AUTO_SHARED_BUFFERS_MAX


@pytest.mark.parametrize(("value", "expected"), [
    ("512MB", 512 << 20), ("2GB", 2 << 30), (" 64mb ", 64 << 20), ("131072kB", 128 << 20),
    ("default", None), ("", None), ("AUTO", shared_buffers_bytes("auto")),
])
def test_sizes_and_keywords(value: str, expected: int | None) -> None:
    assert shared_buffers_bytes(value) == expected


@pytest.mark.parametrize("value", ["1G", "lots", "0MB", "-5MB", "1.5GB", "MB", "12"])
def test_a_bad_value_names_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match="FACTBANK_PG_SHARED_BUFFERS"):
        shared_buffers_bytes(value)


def test_the_setting_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().pg_shared_buffers == "auto" or os.environ.get(
        "FACTBANK_PG_SHARED_BUFFERS")
    monkeypatch.setenv("FACTBANK_PG_SHARED_BUFFERS", "256MB")
    assert Settings.from_env().pg_shared_buffers == "256MB"
