"""Uninstall gives back every JSON file byte for byte, whatever its formatting
(docs/principles.md#installers-respect-the-users-files; once a one-line
`"PreToolUse": [{...}]` came back spread over several lines).

The corpus (tests/fixtures/settings-corpus) holds settings files written the ways people and
tools write them: one-line lists inside an indented file, minified without a final newline,
CRLF, tabs with inline objects, mixed indentation with 1e2 and 0.50, raw and escaped unicode
with `\\/`, trailing spaces and a blank last line, `{}`. Each is installed into as Claude's
settings.json, ~/.claude.json and Codex's hooks.json at once, then uninstalled.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from factbank_client.install import common
from factbank_client.install import harnesses as installer
from factbank_client.install.files import our_handlers

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "settings-corpus"
FILES = sorted(CORPUS.glob("*.json"))


def targets(home: Path) -> list[Path]:
    return [home / ".claude" / "settings.json", home / ".claude.json",
            home / ".codex" / "hooks.json"]


def paths_for(home: Path) -> common.Paths:
    return common.Paths.from_env({"HOME": str(home)})


def seed(home: Path, corpus_file: Path) -> bytes:
    raw = corpus_file.read_bytes()
    for path in targets(home):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    return raw


def test_the_corpus_is_varied() -> None:
    raws = [f.read_bytes() for f in FILES]
    assert len(FILES) >= 8
    assert any(b"\r\n" in r for r in raws) and any(b"\t" in r for r in raws)
    assert any(not r.endswith(b"\n") for r in raws)
    assert any(b'"PreToolUse": [{' in r for r in raws)


@pytest.mark.parametrize("corpus_file", FILES, ids=[f.stem for f in FILES])
def test_uninstall_is_byte_identical(tmp_path: Path, corpus_file: Path) -> None:
    home = tmp_path / "home"
    raw = seed(home, corpus_file)
    installer.apply(installer.plan_install(["all"], paths_for(home)))
    for path in targets(home):
        assert path.read_bytes() != raw, f"install did not change {path}"
    settings = json.loads(targets(home)[0].read_text())
    assert our_handlers(settings) and "factbank" in json.loads(
        targets(home)[1].read_text())["mcpServers"]
    installer.apply(installer.plan_install(["all"], paths_for(home)))  # a rerun in between
    installer.apply(installer.plan_uninstall(["all"], paths_for(home)))
    for path in targets(home):
        assert path.read_bytes() == raw, f"{path} differs after uninstall"


@pytest.mark.parametrize("corpus_file", FILES[:3], ids=[f.stem for f in FILES[:3]])
def test_an_edit_made_meanwhile_is_kept(tmp_path: Path, corpus_file: Path) -> None:
    home = tmp_path / "home"
    seed(home, corpus_file)
    installer.apply(installer.plan_install(["claude"], paths_for(home)))
    settings = targets(home)[0]
    data = json.loads(settings.read_text())
    data["model"] = "haiku-the-user-chose"
    settings.write_text(json.dumps(data, indent=2))
    installer.apply(installer.plan_uninstall(["claude"], paths_for(home)))
    after = json.loads(settings.read_text())
    assert after["model"] == "haiku-the-user-chose" and not our_handlers(after)
    expected = json.loads(corpus_file.read_text())
    expected["model"] = "haiku-the-user-chose"
    assert after == expected


def test_the_manifest_that_keeps_originals_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, FILES[0])
    paths = paths_for(home)
    installer.apply(installer.plan_install(["all"], paths))
    assert stat.S_IMODE(paths.manifest.stat().st_mode) == 0o600
    harnesses = json.loads(paths.manifest.read_text())["harnesses"]
    kept = [rec["original"] for h in harnesses.values() for rec in h.get("files", {}).values()
            if "original" in rec]
    assert FILES[0].read_text() in kept
