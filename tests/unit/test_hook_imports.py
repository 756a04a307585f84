"""What each hook loads, and that the cheap stand-ins it loads instead answer as the modules
they replace.

A hook is a fresh `python -I -S` per event, so every module it imports is paid at every
prompt (docs/harnesses.md). Each hook entry point is run here in such a process, on its real
path (a stand-in recall service answering a block that quotes a file of the repository, so
the working-tree check and the output run too), and the modules it holds at the end are
compared with HEAVY: none may be loaded. A regression (an `import json` or `re` at the top of
a module on the path) fails here, whatever the machine's load; the milliseconds each module
costs are in the docstrings of the modules that avoid it.

The rest holds the stand-ins to their originals: lightjson to json, simpletoml to tomllib,
the string URL, remote and git-config readers to urllib.parse, the regex and configparser.
"""

from __future__ import annotations

import configparser
import json
import math
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from factbank_client import config, lightjson, minihttp, project, simpletoml
from factbank_client.staleness import worktree
from tests.unit.hook_standins import LoopbackService

CLIENTS = str(Path(__file__).resolve().parents[2] / "clients")

# Never loaded by a hook process, on any hook's path (the recording child may load more).
HEAVY = frozenset({
    "json", "re", "enum", "typing", "pathlib", "tomllib", "configparser", "urllib",
    "urllib.parse", "ipaddress", "socket", "selectors", "signal", "functools", "collections",
    "contextlib", "dataclasses", "inspect", "hashlib", "subprocess", "threading", "string",
    "warnings", "http.client", "ssl", "email", "urllib.request", "asyncio", "logging",
    "factbank_common.schema", "tree_sitter", "httpx", "factbank", "site",
})
QUOTED = "justfile"
BLOCK = "[factbank] Remembered facts\n- [#1] bench-api 用 `just build` 构建"


class StandIn(LoopbackService):
    """Recall's `/v1/inject` (a block with one fact quoting the repository's justfile) and
    ingest's `/v1/timeline/events`, on one loopback port."""

    def answer(self, path: str, body: dict, token: str) -> tuple[int, dict]:
        if path == "/v1/inject":
            return 200, {"text": BLOCK, "facts": [1], "sources": [
                {"id": 1, "source": {"kind": "file", "location": f"{QUOTED}:1"},
                 "quote": "build:", "fingerprint": {}}]}
        return 200, {"accepted": len(body.get("events") or ()), "conflicts": []}


@pytest.fixture
def place(tmp_path: Path) -> Iterator[tuple[dict, Path]]:
    """(the hook's environment, the repository it runs in), with a running stand-in."""
    standin = StandIn()
    home = tmp_path / "home"
    cfg = home / ".config" / "factbank" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(f'url = "{standin.url}"  # ingest\nrecall_url = "{standin.url}"\n'
                   'team_categories = ["decisions"]\n\n[banks.personal]\n'
                   'token = "fb_0123456789abcdefghij"\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/api.git\n')
    (repo / QUOTED).write_text("build:\n    cargo build\n")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "FACTBANK_VERIFY": "0"}
    yield env, repo
    standin.close()


PROBE = """import sys
sys.path.insert(0, {clients!r})
sys.argv = ["hooks.py", *{args!r}]
from factbank_client.hook import entry
entry.main()
with open({out!r}, "w") as fh:
    fh.write("\\n".join(sorted(sys.modules)))
"""


def loaded(place: tuple[dict, Path], tmp_path: Path, args: list[str],
           payload: dict) -> tuple[set[str], str]:
    """(the modules a fresh `python -I -S` holds after running the hook entry point with
    `args` on `payload`, what it printed)."""
    env, repo = place
    out = tmp_path / "modules.txt"
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE.format(clients=CLIENTS, args=args,
                                                         out=str(out))],
        input=json.dumps(payload).encode(), capture_output=True, env=env, cwd=repo,
        timeout=30)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return set(out.read_text().split("\n")), proc.stdout.decode()


def claude(event: str, repo: Path, **more: Any) -> dict:
    return {"session_id": f"s-{event}", "cwd": str(repo), "hook_event_name": event,
            "transcript_path": None, **more}


@pytest.mark.parametrize("args,event,more,prints", [
    (["session-start"], "SessionStart", {"source": "startup"}, True),
    (["user-prompt-submit"], "UserPromptSubmit", {"prompt": "how do I build?"}, True),
    (["stop"], "Stop", {"stop_hook_active": False}, False),
    (["post-tool-use"], "PostToolUse",
     {"tool_name": "Edit", "tool_input": {"file_path": "justfile"}, "tool_use_id": "t1"},
     False),
    (["user-prompt-submit", "gemini"], "BeforeAgent", {"prompt": "how do I build?"}, True),
    (["session-start", "qwen"], "SessionStart", {"source": "startup"}, True),
    (["stop", "opencode"], "Stop", {"stop_hook_active": False}, False),
], ids=lambda v: "-".join(v) if isinstance(v, list) else None)
def test_each_hook_loads_no_heavy_module(place: tuple[dict, Path], tmp_path: Path,
                                         args: list[str], event: str, more: dict,
                                         prints: bool) -> None:
    modules, printed = loaded(place, tmp_path, args, claude(event, place[1], **more))
    assert not modules & HEAVY, sorted(modules & HEAVY)
    if prints:  # the whole path ran: the block, checked against the working tree, printed
        assert "bench-api" in printed, printed
        assert {"factbank_client.staleness.worktree", "factbank_client.config",
                "factbank_client.project", "factbank_common.inert"} <= modules


def test_copilot_prompt_hook_loads_no_heavy_module(place: tuple[dict, Path],
                                                   tmp_path: Path) -> None:
    """Copilot CLI's camelCase payload, translated by hook/adapt.py in the process."""
    payload = {"sessionId": "c1", "timestamp": 1796191695517, "cwd": str(place[1]),
               "prompt": "how do I build?"}
    modules, printed = loaded(place, tmp_path, ["user-prompt-submit", "copilot"], payload)
    assert not modules & HEAVY, sorted(modules & HEAVY)
    assert "bench-api" in json.loads(printed)["additionalContext"]


# --- the stand-ins answer as the modules they replace ----------------------------------------


def test_lightjson_is_json() -> None:
    docs = ['{"a": [1, 2.5, -3e5, true, false, null, "x\\u00e9\\n"], "b": {"c": "中文"}}',
            " [] ", '"s"', "1", "NaN", "[Infinity, -Infinity]", '{"a":1,"a":2}', "\n{}\r\n"]
    for doc in docs:
        got, want = lightjson.loads(doc), json.loads(doc)
        assert repr(got) == repr(want) or (isinstance(got, float) and math.isnan(got))
        assert repr(lightjson.loads(doc.encode())) == repr(got)
    for bad in ["", "{", "[1,]", "{}x", "\ufeff{}", '{"a" 1}', b"\xff"]:
        with pytest.raises(ValueError) as ours:
            lightjson.loads(bad)
        with pytest.raises(ValueError) as theirs:
            json.loads(bad)
        assert str(ours.value) == str(theirs.value)
    objs: list[Any] = [{"a": [1, 2.5, True, None, "é\u2028\n\x7f"], "b": {"c": "中文"}, 3: "x"},
                       "str", 1, [], {}, float("inf")]
    for obj in objs:
        for ascii_only in (True, False):
            assert lightjson.dumps(obj, ensure_ascii=ascii_only) == json.dumps(
                obj, ensure_ascii=ascii_only)
    with pytest.raises(TypeError, match="not JSON serializable"):
        lightjson.dumps({"a": object()})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        lightjson.dumps(loop)


TOML = [
    'url = "http://h:1"\nrecall_url = \'http://h:2\'  # c\n[banks.personal]\ntoken = "t"\n',
    '# only a comment\n\n',
    'team_categories = ["decisions", \'people\',]\n[banks . team]\ntoken="x"\n',
    '[banks.a]\ntoken = "1"\n[banks]\n[banks.b]\ntoken = "2"\r\n',
    'a = []\n',
    # off the subset: tomllib answers (or raises), simpletoml hands them over
    'url = "http://h\\u00e9"\n', 'port = 8701\n', 'a.b = "x"\n', '"q" = "x"\n',
    'a = """x"""\n', 'a = {b = "c"}\n', 'a = ["x",\n "y"]\n', '[[t]]\nx = "1"\n',
    # errors tomllib gives
    'a = "1"\na = "2"\n', '[t]\n[t]\n', 'a = "1"\n[a.b]\n', '[t]\nx = "1"\n[t.x]\n',
    '[t.x]\n[t]\nx = "1"\n', 'a = "1" b\n', 'a = "x\x01"\n', '= "x"\n', '[]\n', 'a = "x\n',
    '# bad \x01 comment\n', 'a = "x"\rb = "y"\n', "\ufeffa = 'x'\n",
]


@pytest.mark.parametrize("text", TOML)
def test_simpletoml_is_tomllib(text: str, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(text.encode())
    try:
        want: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        want = type(exc)
    with path.open("rb") as fh:
        try:
            got: Any = simpletoml.load(fh)
        except tomllib.TOMLDecodeError as exc:
            got = type(exc)
    assert got == want
    parsed = simpletoml.parse(text.encode())
    assert parsed is None or parsed == want


URLS = ["http://127.0.0.1:8701", "https://factbank.example.com", "http://h:80/api/v1",
        "http://h.internal:65535/a.b/c-d_e~f", "http://a..b:1", "127.0.0.1:8701", "8701",
        "HTTP://H:1", "http://h:1/", "http://h:08701", "http://h:0", "http://-h:1",
        "http://h:1?x", "http://u@h:1", "http://[::1]:8", "http://h:1/a%20b", "ftp://h",
        "http://h_x:1", " http://h:1", "http://h:99999"]


def test_a_normal_url_is_returned_as_normalize_url_returns_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def full(url: str) -> str | type:
        try:
            return config.normalize_url(url)
        except ValueError as exc:
            return type(exc)

    fast = {u: full(u) for u in URLS}
    nexts = {u: config._next_port(u) for u in URLS if not isinstance(fast[u], type)}
    monkeypatch.setattr(config, "_normal", lambda text: None)  # the urllib/re path only
    assert fast == {u: full(u) for u in URLS}
    assert nexts == {u: config._next_port(u) for u in nexts}


def test_minihttp_splits_a_url_as_urlsplit_does() -> None:
    for url in [*URLS, "http://h?a/b", "http://h:1/a#f", "http://h:1/ a", "http://h:"]:
        try:
            p = urlsplit(url)
            want: Any = (p.scheme, p.hostname, p.port,
                         (p.path or "/") + (f"?{p.query}" if p.query else ""), p.netloc)
        except ValueError:
            want = ValueError
        try:
            got: Any = minihttp.split_url(url)
        except ValueError:
            got = ValueError
        assert got == want, url


SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # the pattern project._scp replaces


def test_scp_remotes_read_as_the_pattern_reads_them() -> None:
    import random

    rnd = random.Random(1)
    samples = ["git@github.com:acme/api.git", "a@b@c:d", "x/y@h:p", "h://x", "@h:p", "h:",
               "h:p\nq", "a:b@ab/\n", "u@:p"]
    samples += ["".join(rnd.choice("ab@:/\n") for _ in range(rnd.randint(0, 9)))
                for _ in range(20000)]
    for url in samples:
        m = SCP.match(url)
        assert project._scp(url) == (m.groups() if m else None), repr(url)


def reference_origin(config_file: Path) -> tuple[str | None, list[str]]:
    """origin_url and the remote urls as RawConfigParser(strict=False) read them."""
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(config_file, encoding="utf-8")
    except configparser.Error:
        return None, []
    sections = sorted((s for s in parser.sections() if s.startswith("remote ")),
                      key=lambda s: s != 'remote "origin"')
    urls = [parser.get(s, "url", fallback="") or "" for s in sections]
    return next((u for u in urls if u), None), urls


GIT_CONFIGS = [
    '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/api.git\n',
    '[remote "up"]\n\turl = https://x/y\n[remote "origin"]\n\turl = ssh://git@h/a.git\n',
    'url = x\n[remote "origin"]\nurl=y\n', '[http]\n\tsslVerify\n[remote "origin"]\n\turl = a\n',
    '# c\n; d\n\n[remote "origin"]\n\turl = one\n\t\tcontinued\n\n\t\tmore\n\n',
    '[DEFAULT]\nurl = dflt\n[remote "a"]\nfetch = x\n', '[remote "o"]\n\t= x\n\turl = q\n',
    '[remote "origin"]\n\turl =\n[remote "b"]\n  url : z  \n',
    '[remote "origin"]\n\turl = a\n\turl = b\n[remote "origin"]\n\tURL = c\n',
    '[]\n[remote "o"]\nurl=1\n', '[a]]\nurl=1\n[remote "x"] trailing\nurl=2\n',
    '[remote "origin"]\r\n\turl = crlf\r\n', '[remote "o"]\n\turl = a\n  # c\n\t\tcont\n',
    '[remote "o"]\n\tfetch = a\n   [remote "x"]\n\turl = b\n', '',
]


@pytest.mark.parametrize("text", GIT_CONFIGS)
def test_git_config_read_as_configparser_reads_it(text: str, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_bytes(text.encode())
    origin, urls = reference_origin(tmp_path / ".git" / "config")
    assert project.origin_url(tmp_path) == origin
    assert project.remotes(tmp_path) == sorted(
        {u for u in map(project.normalise_remote, urls) if u})[:20]
    assert project.project_key(tmp_path) == (
        project.normalise_remote(origin) if origin else tmp_path.name.lower())


def test_repo_root_through_a_worktree_file(tmp_path: Path) -> None:
    main = tmp_path / "main"
    (main / ".git" / "worktrees" / "w").mkdir(parents=True)
    (main / ".git" / "config").write_text('[remote "origin"]\nurl=git@h:w/t.git\n')
    (main / ".git" / "worktrees" / "w" / "commondir").write_text("../..\n")
    (tmp_path / "w" / "sub").mkdir(parents=True)
    (tmp_path / "w" / ".git").write_text(f"gitdir: {main}/.git/worktrees/w\n")
    assert project.repo_root(tmp_path / "w" / "sub") == (tmp_path / "w").resolve()
    assert project.root_dir(str(tmp_path / "w" / "sub")) == str((tmp_path / "w").resolve())
    assert project.project_key(tmp_path / "w" / "sub") == "h/w/t"


def test_worktree_reads_locations_and_blob_ids_as_its_patterns_did() -> None:
    import random

    from factbank_common import schema

    location = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")
    hex40 = re.compile(r"^[0-9a-f]{40}$")
    rnd = random.Random(2)
    for _ in range(50000):
        loc = "".join(rnd.choice("a1:-\n٣") for _ in range(rnd.randint(0, 9)))
        m = location.match(loc)
        assert worktree._location(loc) == (m.group("path", "start") if m else None), repr(loc)
        assert worktree.split_symbol(loc) == schema.split_symbol(loc)
    for text in ["a" * 40, "a" * 40 + "\n", "a" * 39, "A" * 40, "a" * 41, "a" * 40 + "\n\n"]:
        assert worktree._hex40(text) == bool(hex40.match(text))
    assert worktree.SYMBOL_SEPARATOR == schema.SYMBOL_SEPARATOR


def test_config_path_is_the_pathlib_one(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    for explicit in ("~/x/c.toml", f"{tmp_path}/a//b/", "rel/c.toml"):
        monkeypatch.setenv("FACTBANK_CONFIG", explicit)
        assert config.config_path() == Path(explicit).expanduser()
    monkeypatch.delenv("FACTBANK_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{tmp_path}/cfg/")
    assert config.config_path() == tmp_path / "cfg" / "factbank" / "config.toml"
    assert config.load().path == config.config_path()
    os.makedirs(tmp_path / "cfg" / "factbank" / "config.toml")  # a directory: not a file
    assert config.load().tokens == {}
