"""Item 7: files holding secrets are 0600 from the moment they exist, never
written wider and chmodded after: the client's config (tokens), the installer's temp copy of
~/.claude.json (and a new ~/.claude.json), and `factbank export --out`. Checked under a
permissive umask (0o022), by watching every `os.open` (mode 0600, O_EXCL for temp files) and
the mode of each temp file at the moment it replaces the real one."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from factbank_client import config, safefs
from factbank_client.cli import common as cli_common
from factbank_client.cli import facts as cli_facts
from factbank_client.install import harnesses as installer

TOKEN = "fb_" + "s" * 43


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def permissive_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def watch(monkeypatch):
    """Record every os.open (path, flags, mode) and the mode and content of every file at the
    moment os.replace moves it over another; forbid chmod after the content is written."""
    opened: list[tuple[str, int, int]] = []
    replaced: list[tuple[str, int, str]] = []
    real_open, real_replace = os.open, os.replace

    def spy_open(path, flags, mode=0o777, *a, **kw):
        opened.append((str(path), flags, mode))
        return real_open(path, flags, mode, *a, **kw)

    def spy_replace(src, dst, *a, **kw):
        replaced.append((str(dst), stat.S_IMODE(os.stat(src).st_mode),
                         Path(src).read_text("utf-8")))
        return real_replace(src, dst, *a, **kw)

    def no_chmod(*a, **kw):
        raise AssertionError(f"chmod after writing: {a}")

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    monkeypatch.setattr(Path, "chmod", no_chmod)
    return opened, replaced


def test_config_with_a_token_is_created_0600(tmp_path, watch, monkeypatch):
    opened, replaced = watch
    monkeypatch.setattr(os, "chmod", lambda *a, **k: pytest.fail(f"chmod {a}"))
    path = tmp_path / "cfg" / "config.toml"
    config.save_login("http://127.0.0.1:8701", TOKEN, path=path)
    assert mode(path) == 0o600
    assert TOKEN in path.read_text()
    # The only file ever created: a fresh temp file, 0600, O_EXCL; it held the token at 0600.
    assert [(m, bool(f & os.O_EXCL)) for _, f, m in opened] == [(0o600, True)]
    assert replaced == [(str(path), 0o600, path.read_text())]
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


def test_an_existing_wide_config_becomes_0600_before_the_token_is_written(tmp_path, watch):
    _, replaced = watch
    path = tmp_path / "config.toml"
    path.write_text('url = "http://127.0.0.1:8701"\n')
    os.chmod(path, 0o644)
    config.save_login("http://127.0.0.1:8701", TOKEN, path=path)
    assert mode(path) == 0o600
    assert replaced[0][1] == 0o600 and TOKEN in replaced[0][2]


@pytest.mark.parametrize("original", [None, 0o600, 0o644])
def test_installer_temp_copy_of_claude_json_is_0600(tmp_path, watch, original):
    opened, replaced = watch
    cj = tmp_path / ".claude.json"
    if original is not None:
        cj.write_text('{"oauthAccount": {"accessToken": "x"}}\n')
        os.chmod(cj, original)
    installer.write_text(cj, '{"oauthAccount": {"accessToken": "x"}, "mcpServers": {}}\n')
    temps = [(m, f) for p, f, m in opened if Path(p).parent == tmp_path]
    assert temps and all(m == 0o600 and f & os.O_EXCL for m, f in temps), temps
    # A new ~/.claude.json is 0600; an existing one keeps its own mode, and the temp copy is
    # never wider than the file it replaces.
    expected = 0o600 if original is None else original
    assert mode(cj) == expected
    assert replaced[0][1] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == [".claude.json"]


def test_temp_names_are_fresh_0600_files(tmp_path):
    target = tmp_path / "settings.json"
    a, fa = safefs.new_temp(target)
    b, fb = safefs.new_temp(target)
    os.close(fa)
    os.close(fb)
    assert a != b and mode(a) == mode(b) == 0o600


def test_installer_private_manifest_is_0600_even_when_it_existed_wider(tmp_path, watch):
    _, replaced = watch
    manifest = tmp_path / "install-manifest.json"
    manifest.write_text("{}")
    os.chmod(manifest, 0o644)
    installer.write_text(manifest, '{"original": "text"}', private=True)
    assert mode(manifest) == 0o600 and replaced[0][1] == 0o600


class FakeClient:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def export(self, bank=None):
        yield '{"content": "The API key of staging is in vault"}'


@pytest.mark.parametrize("existing", [False, True])
def test_export_out_is_0600_from_the_start(tmp_path, monkeypatch, watch, existing):
    opened, _ = watch
    monkeypatch.setattr(cli_common, "client", FakeClient)
    out = tmp_path / "facts.jsonl"
    if existing:
        out.write_text("old")
        os.chmod(out, 0o644)
    cli_facts.cmd_export(argparse.Namespace(out=str(out), bank=None))
    assert mode(out) == 0o600
    assert out.read_text().startswith('{"content"')
    assert [(p, m) for p, _, m in opened if p == str(out)] == [(str(out), 0o600)]
