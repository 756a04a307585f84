"""The server's configuration table in docs/operations.md is generated from
`factbank.settings.Settings`, so a variable added, renamed or re-described there shows up in
the docs or fails here."""

from __future__ import annotations

from dataclasses import fields

from factbank import settings as settings_mod
from tests.unit.generated_tables import assert_current


def test_every_field_names_its_variable_and_meaning():
    names = [f.metadata["env"] for f in fields(settings_mod.Settings)]
    assert len(set(names)) == len(names) >= 20
    for f in fields(settings_mod.Settings):
        assert f.metadata["doc"].endswith((".", ")")), f.name


def test_the_docs_table_is_current():
    """docs/operations.md shows `python -m factbank.settings`' output between the markers;
    after changing a field, paste that output there."""
    assert_current("docs/operations.md", "server-settings", "factbank.settings",
                   settings_mod.table)
