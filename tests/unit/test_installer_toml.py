"""The whole-table TOML edits the installer uses on Codex's config.toml: exact round trips,
in-place replacement, quoted keys, and the tomlkit fallback for shapes text cannot edit."""

from __future__ import annotations

import tomllib

import pytest

from factbank_client.errors import TextEditFailed
from factbank_client.install import toml_table as toml

SERVER = {"command": "/venv/bin/python3", "args": ["-P", "-m", "x"], "env_vars": ["A"]}

CASES = [
    "",
    'model = "gpt"\n',
    'model = "gpt"\n\n',
    "# only a comment\n",
    '[mcp_servers.github]\ncommand = "npx"   # keep\n\n[profiles.fast]\nmodel = "m"\n',
    '[mcp_servers]\n\n[mcp_servers.a]\ncommand = "a"\n',
    'a = 1\n\n[tui]\n  # indented\n  theme = "dark"\n\n\n# trailing comment\n',
]


@pytest.mark.parametrize("text", CASES)
def test_put_then_drop_is_exact(text: str) -> None:
    added = toml.put_table(text, ("mcp_servers", "factbank"), SERVER)
    doc = tomllib.loads(added)
    assert doc["mcp_servers"]["factbank"] == SERVER
    assert added.startswith(text)
    assert toml.drop_table(added, ("mcp_servers", "factbank")) == text


def test_a_file_without_final_newline_gets_one() -> None:
    added = toml.put_table('model = "gpt"', ("mcp_servers", "factbank"), SERVER)
    assert toml.drop_table(added, ("mcp_servers", "factbank")) == 'model = "gpt"\n'


def test_replace_in_place_keeps_neighbours() -> None:
    text = ('[mcp_servers.factbank]\ncommand = "/old/python"\nargs = []\n\n'
            '# the next one is mine\n[mcp_servers.mine]\ncommand = "m"\n')
    new = toml.put_table(text, ("mcp_servers", "factbank"), SERVER)
    assert new.endswith('\n\n# the next one is mine\n[mcp_servers.mine]\ncommand = "m"\n')
    assert new.startswith("[mcp_servers.factbank]\n")
    assert "/old/python" not in new


def test_sub_tables_go_with_their_table() -> None:
    text = ('x = 1\n\n[mcp_servers.factbank]\ncommand = "c"\n\n[mcp_servers.factbank.env]\n'
            'A = "1"\n\n[other]\ny = 2\n')
    out = toml.drop_table(text, ("mcp_servers", "factbank"))
    assert out == "x = 1\n\n[other]\ny = 2\n"


def test_quoted_keys_for_codex_trust_state() -> None:
    key = "/home/me/.codex/hooks.json:session_start:0:0"
    text = toml.put_table('model = "m"\n', ("hooks", "state", key), {"trusted_hash": "sha256:ab"})
    assert f'[hooks.state."{key}"]' in text
    assert tomllib.loads(text)["hooks"]["state"][key] == {"trusted_hash": "sha256:ab"}
    assert toml.key_path(f'hooks.state."{key}"') == ("hooks", "state", key)
    assert toml.key_path("a . 'b.c' . d") == ("a", "b.c", "d")
    assert toml.drop_table(text, ("hooks", "state", key)) == 'model = "m"\n'


def test_inline_table_falls_back_to_tomlkit() -> None:
    text = 'mcp_servers = { github = { command = "npx" } }\n'
    with pytest.raises(TextEditFailed):
        toml.put_table(text, ("mcp_servers", "factbank"), SERVER)
    out, created = toml.put(text, ("mcp_servers", "factbank"), SERVER)
    doc = tomllib.loads(out)
    assert doc["mcp_servers"]["factbank"] == SERVER
    assert doc["mcp_servers"]["github"] == {"command": "npx"}
    assert created == []
    back = toml.drop(out, ("mcp_servers", "factbank"))
    assert tomllib.loads(back) == tomllib.loads(text)


def test_dotted_keys_are_refused_rather_than_mangled() -> None:
    # tomlkit would turn the dotted keys into a table that swallows `model`; the check
    # refuses that, and the installer reports it instead of writing a broken config.
    text = 'mcp_servers.factbank.command = "old"\nmodel = "m"\n'
    with pytest.raises(TextEditFailed):
        toml.put(text, ("mcp_servers", "factbank"), SERVER)


def test_prune_empty_only_removes_what_it_created() -> None:
    text = "[mcp_servers]\n\n[keep]\n"
    assert toml.prune_empty(text, [("mcp_servers",)]) != text
    assert "keep" in toml.prune_empty(text, [("mcp_servers",)])
    assert toml.prune_empty(text, []) == text
