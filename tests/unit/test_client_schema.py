"""The wire contract's constants (factbank_common/schema.py) are the ones the server checks:
one definition, imported by the server, and free of imports so the services depend on no
client code through it."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import msgspec
import pytest

from factbank import models
from factbank.write import gate
from factbank_common import schema


def test_schema_imports_nothing_but_typing() -> None:
    tree = ast.parse(Path(schema.__file__).read_text("utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "typing"}, imported


def test_the_server_checks_exactly_the_schema_vocabularies() -> None:
    hints = typing.get_type_hints(models.NewFact)
    assert hints["origin"] is schema.Origin
    assert typing.get_type_hints(models.Source)["kind"] is schema.SourceKind
    assert typing.get_type_hints(models.Fact)["origin"] is schema.Origin
    assert schema.SOURCE_KINDS == ("file", "url", "commit", "command", "user", "doc", "fact")
    assert schema.ORIGINS == ("user", "verified", "inferred")
    for kind in schema.SOURCE_KINDS:
        msgspec.convert({"kind": kind}, models.Source)
    with pytest.raises(msgspec.ValidationError, match="kind"):
        msgspec.convert({"kind": "rumour"}, models.Source)


def test_the_tools_question_limit_is_the_gates() -> None:
    assert schema.MAX_QUESTIONS == gate.MAX_QUESTIONS
