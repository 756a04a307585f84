"""Facts anchored to symbols (`path::Qualified.name`): the digest of a symbol's normalised
text, the add-time check, and `verify` in real git repositories. Per language (Python, TS,
JavaScript, Go, Rust) on the realistic fixtures (tests/fixtures/code) and on this project's
own code (Python, the Pi extension's TypeScript): line drift and reformatting keep the fact,
a move within the file or to another file moves it, a body edit or a deletion stales it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from factbank_client.client import check_file_quote, new_fact
from factbank_client.code import anchor
from factbank_client.errors import QuoteNotFound
from factbank_client.staleness.verify import Repo, Skip, Verdict, check
from factbank_common import schema
from tests.conftest import git

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "code"

# (source file, its path in the test repository, symbol, a quote from its body, a body edit)
CASES = [
    (FIXTURES / "retry.py", "src/retry.py", "RetryPolicy.backoff",
     "delay = min(self.cap, self.base * 2 ** attempt)", ("return delay *", "return 2 * delay *")),
    (FIXTURES / "retry.ts", "src/retry.ts", "RetryPolicy.delay",
     "return this.jitter(Math.min(this.cap, 500 * 2 ** attempt));", ("500 *", "250 *")),
    (FIXTURES / "widget.jsx", "ui/widget.jsx", "Panel.render",
     "return <div>{this.props.title}</div>;", ("props.title", "props.name")),
    (FIXTURES / "retry.go", "retry/retry.go", "Policy.Backoff",
     "d := p.Base << n", ("d = MaxDelay", "d = MaxDelay / 2")),
    (FIXTURES / "retry.rs", "src/retry.rs", "RetryPolicy.backoff",
     "self.base * 2u32.pow(attempt)", ("-> Duration {", "-> Duration {\n        let _ = attempt;")),
    # This project's own code.
    (ROOT / "clients" / "factbank_client" / "staleness" / "fingerprint.py", "fingerprint.py",
     "region_sha256",
     "region = lines[first - 1: first - 1 + count]", ("x.rstrip()", "x.strip()")),
    (ROOT / "clients" / "factbank_client" / "assets" / "pi" / "factbank.ts", "pi/factbank.ts",
     "quoteSpans", "const needle = quote.split(/\\s+/).filter((w) => w).join(\" \");",
     ("pos += m[0].length + 1;", "pos += m[0].length;")),
]
IDS = [c[1] for c in CASES]


def _case(case, tmp_path: Path):
    source, rel, name, quote, edit = case
    text = source.read_text("utf-8")
    repo = tmp_path / "repo"
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, repo / rel)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo, rel, name, quote, edit, text


def _fact(repo: Path, location: str, quote: str, fid: int = 1) -> dict:
    body = new_fact("a claim about the symbol", "project", "file", location, quote, tags=[],
                    cwd=repo)
    return {"id": fid, **body}


def _comment(rel: str) -> str:
    return "#" if rel.endswith(".py") else "//"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_add_records_the_symbol_and_its_digest(case, tmp_path: Path) -> None:
    repo, rel, name, quote, _, text = _case(case, tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    fp = fact["fingerprint"]
    sym = anchor.resolve(text.encode(), rel, name)
    assert fact["source"]["location"] == f"{rel}::{name}"
    assert fp["symbol"] == name and fp["symbol_sha256"] == sym.digest
    assert (fp["line"], fp["lines"]) == (sym.start_line, sym.end_line - sym.start_line + 1)
    assert fp["path"] == rel and fp["dirty"] is False


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_line_drift_and_reformatting_keep_the_fact_a_body_edit_stales_it(case, tmp_path):
    repo, rel, name, quote, edit, text = _case(case, tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    sym = anchor.resolve(text.encode(), rel, name)
    c = _comment(rel)
    lines = text.splitlines(keepends=True)

    # Lines above it: fresh, with the new span recorded (so the next verify is a fast path).
    at = 1 if rel.endswith(".go") else 0  # Go's package clause stays first
    drifted = [*lines[:at], f"{c} a note\n", "\n", f"{c} another\n", *lines[at:]]
    (repo / rel).write_text("".join(drifted), "utf-8")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "fresh", v
    assert v.fingerprint is not None and v.fingerprint["line"] == sym.start_line + 3
    assert v.fingerprint["symbol_sha256"] == sym.digest

    # Its own whitespace and comments: a comment and a blank line inside, trailing blanks,
    # and (outside Python) the body reindented.
    body = lines[sym.start_line:sym.end_line - 1]
    indent = body[0][: len(body[0]) - len(body[0].lstrip())]
    brace = not rel.endswith(".py")
    body = [(("  " + ln) if brace and ln.strip() else ln).rstrip("\n") + "  \n" for ln in body]
    reformatted = [*lines[:sym.start_line], f"{indent}{c} why it is so\n", "\n", *body,
                   *lines[sym.end_line - 1:]]
    (repo / rel).write_text("".join(reformatted), "utf-8")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "fresh", v

    # The body: stale, naming the symbol, with its new text as the context.
    old, new = edit
    start = sum(len(x) for x in lines[:sym.start_line - 1])
    end = sum(len(x) for x in lines[:sym.end_line])
    assert old in text[start:end]
    edited = text[:start] + text[start:end].replace(old, new, 1) + text[end:]
    (repo / rel).write_text(edited, "utf-8")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "stale", v
    assert name in (v.reason or "") and "changed" in (v.reason or "")
    assert new.splitlines()[0].strip() in (v.context or "")


def _wrap(rel: str, name: str, text: str) -> tuple[str, str]:
    """A file holding `text` (a symbol's lines) where that symbol keeps its name, and the name."""
    owner = name.rsplit(".", 1)[0] if "." in name else ""
    if rel.endswith(".go"):
        return "package retry\n\nimport \"time\"\n\n" + text + "\n", name
    if rel.endswith(".rs"):
        return f"impl {owner} {{\n{text}\n}}\n", name
    if rel.endswith((".ts", ".jsx")) and owner:
        return f"export class {owner} {{\n  {text}\n}}\n", name
    if rel.endswith(".py") and owner:  # a method moved to module level: a new name
        import textwrap
        return "import random\n\n\n" + textwrap.dedent("    " + text) + "\n", name.rsplit(".")[-1]
    return text + "\n", name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_symbol_moved_to_another_file_moves_the_fact(case, tmp_path: Path) -> None:
    repo, rel, name, quote, _, text = _case(case, tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    sym = anchor.resolve(text.encode(), rel, name)
    lines = text.splitlines(keepends=True)
    own = "".join(lines[sym.start_line - 1:sym.end_line])
    rest = lines[:sym.start_line - 1] + lines[sym.end_line:]
    (repo / rel).write_text("".join(rest), "utf-8")
    suffix = Path(rel).suffix
    new_rel = f"moved/elsewhere{suffix}"
    body, new_name = _wrap(rel, name, own.lstrip())
    (repo / new_rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / new_rel).write_text(body, "utf-8")
    # Untracked (a teammate's uncommitted move) and then committed: moved both times.
    for committed in (False, True):
        v = check(fact, Repo(repo))
        assert isinstance(v, Verdict) and v.verdict == "moved", v
        assert v.location == f"{new_rel}::{new_name}"
        assert v.fingerprint is not None and v.fingerprint["symbol"] == new_name
        assert v.fingerprint["symbol_sha256"] == sym.digest
        if not committed:
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "move it")
    # Deleted there too: stale, saying it is gone.
    (repo / new_rel).unlink()
    git(repo, "commit", "-q", "-am", "drop it")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "stale", v
    assert "no longer defined" in (v.reason or "")


def test_moved_within_the_file_and_a_renamed_class(tmp_path: Path) -> None:
    repo, rel, name, quote, _, text = _case(CASES[0], tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    # The method moved below its siblings: fresh, new span.
    sym = anchor.resolve(text.encode(), rel, name)
    lines = text.splitlines(keepends=True)
    own = lines[sym.start_line - 1:sym.end_line]
    budget = anchor.resolve(text.encode(), rel, "RetryPolicy.Budget")
    moved = (lines[:sym.start_line - 1] + lines[sym.end_line:budget.start_line - 1] + ["\n"]
             + own + lines[budget.start_line - 2:])
    (repo / rel).write_text("".join(moved), "utf-8")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "fresh" and v.fingerprint is not None
    assert v.fingerprint["line"] > sym.start_line
    # Its class renamed: the same text under a new name, found by its digest.
    (repo / rel).write_text(text.replace("class RetryPolicy:", "class Retrier:"), "utf-8")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "moved", v
    assert v.location == f"{rel}::Retrier.backoff"


def test_a_fact_quoting_a_comment_goes_stale_when_the_comment_goes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.go").write_text("package m\n\nfunc F() int {\n\t// never zero: callers divide\n"
                               "\treturn 1\n}\n")
    git(repo, "init", "-q", "-b", "main")
    fact = _fact(repo, "m.go::F", "// never zero: callers divide")
    (repo / "m.go").write_text("package m\n\nfunc F() int {\n\treturn 1\n}\n")
    v = check(fact, Repo(repo))
    assert isinstance(v, Verdict) and v.verdict == "stale"
    assert "quote is no longer in it" in (v.reason or "")


@pytest.mark.parametrize(("location", "quote", "words"), [
    ("src/retry.rb::Policy.backoff", "x", "symbol anchors are for Python"),
    ("src/retry.py::RetryPolicy.backof", "x", "symbol RetryPolicy.backof is not defined in "
                                              "src/retry.py; it defines RetryPolicy.backoff"),
    ("src/retry.py::Nope", "x", "it defines TransientError, RetryPolicy"),
    ("src/retry.py::", "x", "a symbol source is path::Qualified.name"),
    ("src/retry.py::A b", "x", "is not a qualified name"),
    ("src/missing.py::f", "x", "source file not found: src/missing.py"),
    ("src/retry.py::RetryPolicy.total", "self.base * 2 ** attempt",
     "quote: the quote is not in RetryPolicy.total"),
])
def test_bad_symbol_sources_are_refused_naming_the_field(location, quote, words, tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    shutil.copyfile(FIXTURES / "retry.py", repo / "src" / "retry.py")
    (repo / "src" / "retry.rb").write_text("class Policy\nend\n")
    git(repo, "init", "-q", "-b", "main")
    with pytest.raises(QuoteNotFound) as err:
        check_file_quote(location, quote, cwd=repo, root=repo)
    assert words in str(err.value)
    assert str(err.value).startswith(("source", "quote"))


def test_symbol_locations_shape() -> None:
    assert schema.split_symbol("src/net.py::RetryPolicy.backoff") == ("src/net.py",
                                                                      "RetryPolicy.backoff")
    assert schema.split_symbol("src/net.py:12") is None
    assert schema.symbol_problem("src/net.py:12") is None
    assert schema.symbol_problem("src/net.py::RetryPolicy.backoff") is None
    assert "none of them" in (schema.symbol_problem("Makefile::all") or "")
    assert schema.symbol_language("a/.py") is None and schema.symbol_language("x.TSX") == "tsx"


@pytest.mark.parametrize(("a", "b", "language", "same"), [
    # Python: indentation depth is not syntax, block structure is.
    ("def f(x):\n    if x:\n        a()\n    b()\n",
     "def f(x):\n  if x:\n    a()\n  b()\n", "a.py", True),
    ("def f(x):\n    if x:\n        a()\n    b()\n",
     "def f(x):\n    if x:\n        a()\n        b()\n", "a.py", False),
    ('def f():\n    """Doc.\n\n    More.\n    """\n',
     'def f():\n        """Doc.\n\n        More.\n        """\n', "a.py", True),
    ("def f():\n    return 'a  b'\n", "def f():\n    return 'a b'\n", "a.py", False),
    # Go: newline and semicolon end a statement alike.
    ("package m\nfunc F() { a(); b() }\n", "package m\nfunc F() {\n\ta()\n\tb()\n}\n", "a.go",
     True),
    # JavaScript: comments and spacing do not count, semicolons do.
    ("function f(){return a+b}", "function f() {\n  // sum\n  return a + b\n}", "a.js", True),
    ("function f(){a\n(b)}", "function f(){a;\n(b)}", "a.js", False),
    # Rust: `x` and `x;` as a block's end differ.
    ("fn f() -> u32 { 1 }", "fn f() -> u32 {\n    1 // one\n}", "a.rs", True),
    ("fn f() -> u32 { g() }", "fn f() -> u32 { g(); }", "a.rs", False),
])
def test_the_digest_ignores_whitespace_and_comments_not_code(a, b, language, same) -> None:
    da = anchor.anchors(a.encode(), language)[0].digest
    db = anchor.anchors(b.encode(), language)[0].digest
    assert (da == db) is same


def test_a_repository_without_the_symbol_file_or_the_grammars_is_not_guessed(tmp_path, monkeypatch):
    repo, rel, name, quote, _, text = _case(CASES[0], tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    (repo / rel).write_text(text.replace("2 ** attempt", "3 ** attempt"))

    def broken(*_a, **_k):
        raise ImportError("no grammars")

    monkeypatch.setattr(anchor, "anchors", broken)
    v = check(fact, Repo(repo))
    assert isinstance(v, Skip) and "tree-sitter" in v.reason


# --- verify before inject: the hooks' working-tree check --------------------------------


def test_the_hook_check_follows_the_symbol_in_the_working_tree(tmp_path: Path,
                                                                monkeypatch) -> None:
    from factbank_client.staleness import verify, worktree

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    repo, rel, name, quote, edit, text = _case(CASES[3], tmp_path)  # Go
    fact = _fact(repo, f"{rel}::{name}", quote)
    assert worktree.check(fact, repo)[0] == worktree.HOLDS  # byte-identical: no parse
    lines = text.splitlines(keepends=True)
    (repo / rel).write_text("".join([lines[0], "// drift\n", "\n", *lines[1:]]))
    assert worktree.check(fact, repo)[0] == worktree.HOLDS
    (repo / rel).write_text(text.replace(*edit))  # a teammate's uncommitted body edit
    state, why = worktree.check(fact, repo)
    assert state == worktree.NOT_HOLDING and name in why and "working tree" in why
    block = f"{worktree.FACTS_HEADER} (bank: t)\n- #1 (trust 0.75) a claim"
    out, gone, _ = worktree.filter_block(block, [fact], repo)
    assert gone == [1] and worktree.NOTE_HEADER in out and "- #1 (trust" not in out
    # The same bytes again: the verdict is remembered, nothing is parsed.
    monkeypatch.setattr(verify, "check_symbol", None)
    assert worktree.check(fact, repo) == (state, why)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (repo / rel).unlink()  # a file missing here is unknown, as for a line fact
    assert worktree.check(fact, repo)[0] == worktree.UNKNOWN


def test_the_hook_process_finds_the_grammars_without_site(tmp_path: Path) -> None:
    """The hooks run as `python -I -S` with only the package's parent on sys.path (in an
    editable install, the source tree): the check still parses, not unknown."""
    import json
    import os
    import subprocess
    import sys

    repo, rel, name, quote, edit, text = _case(CASES[0], tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    (repo / rel).write_text(text.replace(*edit))
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'clients')!r})\n"
        "from factbank_client.staleness import worktree\n"
        f"print(json.dumps(worktree.check(json.loads(sys.argv[1]), {str(repo)!r})))\n")
    out = subprocess.run([sys.executable, "-I", "-S", str(probe), json.dumps(fact)],
                         capture_output=True, text=True, timeout=60,
                         env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    state, why = json.loads(out.stdout)
    assert state == "not-holding" and "its body changed" in why, why


# --- a change before it merges: verify --diff ----------------------------------------------


def test_diff_says_which_symbol_facts_a_change_stales_moves_or_leaves(tmp_path: Path) -> None:
    from factbank_client.staleness.verify import change_of, effect_of

    repo, rel, _, _, _, text = _case(CASES[0], tmp_path)  # Python
    git(repo, "tag", "base")
    facts = {
        "body": _fact(repo, f"{rel}::RetryPolicy.Budget.spend", "self.tokens -= 1", 1),
        "drift": _fact(repo, f"{rel}::RetryPolicy.backoff",
                       "delay = min(self.cap, self.base * 2 ** attempt)", 2),
        "moved": _fact(repo, f"{rel}::fetch_with_retry", "return await client.get(url)", 3),
        "same": _fact(repo, f"{rel}::RetryPolicy.none", "return RetryPolicy(attempts=1)", 4),
    }
    cut = text.index("async def fetch_with_retry(")
    (repo / rel).write_text("# a header\n\n" + text[:cut].replace(
        "if self.tokens <= 0:", "if self.tokens < 1:"))
    (repo / "src" / "fetch.py").write_text("import time\n\n\n" + text[cut:])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the change")
    change = change_of(repo, "base..HEAD")
    got = {k: effect_of(f, change) for k, f in facts.items()}
    assert got["body"].effect == "stale" and "body changed" in (got["body"].reason or "")
    assert got["moved"].effect == "moved"
    assert got["moved"].new_location == "src/fetch.py::fetch_with_retry"
    assert got["drift"].effect == "unaffected" and got["same"].effect == "unaffected"
    # Nothing was read from the working tree: an uncommitted edit there changes nothing.
    (repo / rel).write_text("")
    assert effect_of(facts["drift"], change_of(repo, "base..HEAD")).effect == "unaffected"


def test_a_file_the_parser_chokes_on_skips_that_fact_only(tmp_path: Path, monkeypatch) -> None:
    repo, rel, name, quote, edit, text = _case(CASES[0], tmp_path)
    fact = _fact(repo, f"{rel}::{name}", quote)
    (repo / rel).write_text(text.replace(*edit))

    def choke(*_a, **_k):
        raise ValueError("a grammar that cannot read it")

    monkeypatch.setattr(anchor, "anchors", choke)
    v = check(fact, Repo(repo))
    assert isinstance(v, Skip) and "not parsed here" in v.reason
