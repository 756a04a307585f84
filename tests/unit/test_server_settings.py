"""The server's configuration table in docs/operations.md is generated from
`factbank.settings.Settings`, so a variable added, renamed or re-described there shows up in
the docs or fails here."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from factbank import settings as settings_mod

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- server-settings:start -->\n", "<!-- server-settings:end -->"


def test_every_field_names_its_variable_and_meaning():
    names = [f.metadata["env"] for f in fields(settings_mod.Settings)]
    assert len(set(names)) == len(names) >= 20
    for f in fields(settings_mod.Settings):
        assert f.metadata["doc"].endswith((".", ")")), f.name


def test_the_docs_table_is_current():
    """docs/operations.md shows `python -m factbank.settings`' output between the markers;
    after changing a field, paste that output there."""
    text = (ROOT / "docs" / "operations.md").read_text("utf-8")
    shown = text.split(START, 1)[1].split(END, 1)[0]
    assert shown == settings_mod.table()
    printed = subprocess.run([sys.executable, "-m", "factbank.settings"],
                             capture_output=True, text=True, check=True).stdout
    assert printed == shown
