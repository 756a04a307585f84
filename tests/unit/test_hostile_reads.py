"""Every client path that turns a bank's or a repository's text into a file
read, run against one table of hostile locations (tests/unit/hostile_fs.py) in a real git
repository. A reader may refuse or find nothing; it may never read outside the repository (or
into `.git`, or a git-ignored file it was not asked for by the person), so SECRET never shows
up in what it returns or sends, and a quote outside is never "found". The positive table proves
the readers still read what they should, through the root's own link too."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from factbank_client import native, rulepatch, safefs
from factbank_client.cli import common as cli_common
from factbank_client.cli import facts as cli_facts
from factbank_client.client import QuoteCheck, check_file_quote, new_fact
from factbank_client.errors import ProposeError, QuoteNotFound, UnsafePath
from factbank_client.staleness import fingerprint
from factbank_client.staleness.verify import Repo, Skip, check
from factbank_common.commands import CommandError
from tests.unit.hostile_fs import (
    HOSTILE_IDS,
    OK_LINE,
    POSITIVE_IDS,
    SECRET,
    SECRET_LINE,
    USER_CHOSEN_OK,
    hostile,
    layout,
    positive,
    secret_free,
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One layout for the table's read-only readers (a git repository per case costs ~0.15 s
    and the readers change nothing in it)."""
    return layout(tmp_path_factory.mktemp("hostile"))


def _enter(out, monkeypatch, data: Path):
    monkeypatch.setenv("HOME", str(out.private))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(out.repo)
    return out


@pytest.fixture
def lay(shared, tmp_path, monkeypatch):
    return _enter(shared, monkeypatch, tmp_path / "data")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A layout of its own, for tests that change the repository's files."""
    return _enter(layout(tmp_path), monkeypatch, tmp_path / "data")


def _fact(location: str, quote: str, fp: dict | None = None) -> dict:
    return {"id": 7, "source": {"kind": "file", "location": location}, "quote": quote,
            "fingerprint": fp or {}}


class FakeClient:
    """What a reader would send to the bank, recorded."""

    def __init__(self, fact: dict | None = None):
        self.fact, self.sent = fact, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get(self, fid, bank=None):
        return self.fact

    def check(self, facts, bank=None):
        self.sent.append(facts)
        return [{"verdict": "new"} for _ in facts]

    def add(self, fact, bank=None):
        self.sent.append(fact)
        return {"fact": {"id": 1}}


# --- the readers: each returns (read: bool, everything it returned or would send) ----------


def verify_location(root: Path, location: str, *, typed: bool = False):
    """`factbank verify` on a fact whose location is `location`; its quote is not in any file,
    so a file that is read comes back as stale with its lines as the context."""
    v = check(_fact(location, "a quote that is nowhere"), Repo(root))
    return not isinstance(v, Skip) and bool(getattr(v, "context", "")), \
        [v.wire() if not isinstance(v, Skip) else v]


def verify_fingerprint_path(root: Path, location: str, *, typed: bool = False):
    """The same, with the path in the fact's fingerprint (verify prefers it)."""
    path = location.rsplit(":", 1)[0]
    v = check(_fact("docs/ok.txt:2", "a quote that is nowhere",
                    {"path": path, "line": 2, "lines": 1}), Repo(root))
    return not isinstance(v, Skip) and bool(getattr(v, "context", "")), \
        [v.wire() if not isinstance(v, Skip) else v]


def _quote_for(location: str) -> str:
    return OK_LINE if SECRET not in location and "ok" in location else SECRET


def quote_check(root: Path, location: str, *, typed: bool = False):
    """`factbank add`'s check (and the MCP tools'): the quote must be in the file."""
    try:
        got = check_file_quote(location, _quote_for(location), cwd=root, root=root)
    except QuoteNotFound as exc:
        return False, [str(exc)]
    return True, [got.location, got.lines]


def add_body(root: Path, location: str, *, typed: bool = False):
    """The NewFact body `add`, `supersede` and MCP `add` send: location and fingerprint."""
    try:
        body = new_fact("claim", "project", "file", location, _quote_for(location), tags=[],
                        cwd=root)
    except QuoteNotFound as exc:
        return False, [str(exc)]
    return True, [body]


def fingerprint_of(root: Path, location: str, *, typed: bool = False):
    """fingerprint.for_file given a check that names the location's file but holds no bytes:
    it hashes only bytes a check read (through safefs), never opens a path itself."""
    path = location.rsplit(":", 1)[0]
    try:
        real = safefs.inside(root, path)
    except UnsafePath:
        real = Path(root, path.replace("\0", ""))  # what a careless caller would pass
    fp = fingerprint.for_file(QuoteCheck(location=location, lines=[2], spans=[(2, 2)],
                                         path=real), root)
    return fp is not None, [fp]


def confirm_fresh_quote(root: Path, location: str, *, typed: bool = False, monkeypatch=None):
    """`factbank confirm ID --quote Q`: the location is the bank's (a teammate's)."""
    client = FakeClient(_fact(location, "x"))
    monkeypatch.setattr(cli_common, "client", lambda: client)
    args = argparse.Namespace(id=7, bank=None, source=None, quote=_quote_for(location))
    try:
        out = cli_facts._fresh_quote(args)
    except CommandError as exc:
        return False, [str(exc)]
    return True, [out]


def rules_propose_to(root: Path, location: str, *, typed: bool = False):
    """`factbank rules propose ID --to PATH`: the patch shows the file's old text."""
    cand = {"fact": {"id": 4, "content": "Use pnpm"}, "projects": ["a", "b"]}
    try:
        out = rulepatch.propose(root, cand, location.rsplit(":", 1)[0],
                                out=str(root / "rule.patch"))
    except ProposeError as exc:
        return False, [str(exc)]
    return ("first" in out["show"] or SECRET in out["show"]), [out]


READERS = {
    "verify": (verify_location, False),
    "verify_fingerprint_path": (verify_fingerprint_path, False),
    "quote_check": (quote_check, True),
    "add_body": (add_body, True),
    "fingerprint": (fingerprint_of, True),
    "confirm": (confirm_fresh_quote, False),
    "rules_propose": (rules_propose_to, True),
}


def _run(name, root, location, monkeypatch):
    fn, typed = READERS[name]
    if fn is confirm_fresh_quote:
        return fn(root, location, typed=typed, monkeypatch=monkeypatch)
    return fn(root, location, typed=typed)


@pytest.mark.parametrize("case", HOSTILE_IDS)
@pytest.mark.parametrize("reader", list(READERS))
def test_a_hostile_location_is_never_read(lay, reader, case, monkeypatch):
    location = hostile(lay)[case]
    before = lay.snapshot()
    read, out = _run(reader, lay.repo, location, monkeypatch)
    typed = READERS[reader][1]
    if case in USER_CHOSEN_OK and typed:
        return  # a person may cite their own ignored file; the bank may not make us read it
    assert not read, f"{reader} read {location!r}: {out}"
    assert secret_free(out), f"{reader} returned the secret for {location!r}: {out}"
    assert lay.snapshot() == before


@pytest.mark.parametrize("case", POSITIVE_IDS)
@pytest.mark.parametrize("reader", [r for r in READERS if r not in ("rules_propose",
                                                                    "fingerprint")])
@pytest.mark.parametrize("via_link", [False, True], ids=["real_root", "root_via_link"])
def test_a_location_inside_is_still_read(lay, reader, case, via_link, monkeypatch):
    root = lay.tmp / "elsewhere" / "repolink" if via_link else lay.repo
    if via_link:
        monkeypatch.chdir(root)
    read, out = _run(reader, root, positive(lay)[case], monkeypatch)
    assert read, f"{reader} refused {positive(lay)[case]!r}: {out}"
    assert secret_free(out)
    if reader == "add_body":  # the fingerprint of the bytes read, path relative to the root
        assert out[0]["fingerprint"]["path"] == "docs/ok.txt"
        assert out[0]["source"]["location"] == "docs/ok.txt:2"


# --- migrate-native: the memory files themselves are the hostile thing -----------------------


def _links(lay) -> dict[str, tuple[str, str]]:
    """(file in the repository or Claude's memory folder, where it points)."""
    return {
        "claude_md_out": ("CLAUDE.md", "../private/notes.txt"),
        "claude_md_absolute": ("CLAUDE.md", str(lay.notes)),
        "claude_md_dangling_home": ("CLAUDE.md", "~/notes.txt"),
        "dot_claude_dir_out": (".claude", "../private"),
        "agents_md_into_git": ("AGENTS.md", ".git/config"),
        "memory_file_out": ("memory:notes.md", str(lay.notes)),
    }


@pytest.mark.parametrize("case", ["claude_md_out", "claude_md_absolute",
                                  "claude_md_dangling_home", "dot_claude_dir_out",
                                  "agents_md_into_git", "memory_file_out"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry_run", "accept_all"])
def test_migrate_native_never_follows_a_link_out(fresh, case, dry_run):
    lay = fresh
    name, to = _links(lay)[case]
    if name.startswith("memory:"):
        mem = native.claude_memory_dir(lay.repo)
        mem.mkdir(parents=True)
        (mem / name.split(":", 1)[1]).symlink_to(to)
    else:
        target = lay.repo / name
        if target.exists() or target.is_symlink():
            target.unlink()
        target.symlink_to(to)
    if case == "dot_claude_dir_out":
        (lay.private / "CLAUDE.md").write_text(f"- {SECRET_LINE} is kept here.\n")
    (lay.private / "notes.md").write_text(f"- {SECRET_LINE} is kept here.\n")
    lay.notes.write_text(f"- {SECRET_LINE} is kept here.\n")
    harness = "codex" if name == "AGENTS.md" else "claude"
    client = FakeClient()
    plan = native.migrate(client, harness, lay.repo, project="p", dry_run=dry_run,
                          accept_all=not dry_run)
    assert secret_free(plan, client.sent), plan
    assert plan["refused"] or case == "claude_md_dangling_home", plan
    backup = plan["backup"]
    if backup:
        assert secret_free(*(p.read_bytes() for p in Path(backup).rglob("*") if p.is_file()))


def test_migrate_native_still_reads_a_link_inside_the_repository(fresh):
    lay = fresh
    (lay.repo / "CLAUDE.md").unlink()
    (lay.repo / "docs" / "mem.md").write_text(f"- {OK_LINE}.\n")
    (lay.repo / "CLAUDE.md").symlink_to("docs/mem.md")
    client = FakeClient()
    plan = native.migrate(client, "claude", lay.repo, project="p", dry_run=True)
    assert [c["where"] for c in plan["candidates"]] == ["docs/mem.md:1"]
    assert plan["refused"] == []


# --- the helper itself: refusals name the path and the reason -------------------------------


@pytest.mark.parametrize("path, why", [
    ("../x", "outside the repository"), ("a\0b", "NUL"), ("~/x", "home-relative"),
    ("..\\x", "backslash"), ("a/" * 2100 + "x", "too long"), (".git/config", "git's own"),
])
def test_refusals_say_why(tmp_path, path, why):
    with pytest.raises(UnsafePath, match=why):
        safefs.read(tmp_path, path)


def test_a_fifo_inside_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnsafePath, match="not a regular file"):
        safefs.read(tmp_path, "pipe")


def test_dashboard_reports_never_follow_a_link_out(fresh, tmp_path):
    lay = fresh
    """The dashboard's evals page and plot route read report files only inside the reports
    folder: a `.md` or `.png` linked out of it is left out (404 for the plot)."""
    from factbank_client.dashboard import evals_page

    reports = tmp_path / "reports"
    (reports / "2026-12-02").mkdir(parents=True)
    (reports / "2026-12-02" / "report.md").write_text(f"# ok\n\n{OK_LINE}\n")
    (reports / "2026-12-02" / "leak.md").symlink_to(lay.notes)
    (reports / "2026-12-02" / "leak.png").symlink_to(lay.notes)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.md").write_text(f"- {SECRET_LINE}\n")
    (reports / "2026-12-03").symlink_to(outside)  # a folder linked out is not listed
    got = evals_page.latest_reports(reports)
    assert [r["name"] for r in got] == ["2026-12-02"]
    assert [name for name, _ in got[0]["texts"]] == ["report.md"] and secret_free(got)
    with pytest.raises(UnsafePath):
        safefs.read(reports, "2026-12-02/leak.png")


@pytest.mark.parametrize("commit", ["--output=OUT", "-p", "--exec=touch OUT", "a\0b"])
def test_a_banks_commit_is_never_a_git_option(lay, tmp_path, commit):
    """A fingerprint's commit (a teammate's text) reaches git only as a revision: a commit
    fact and a deleted file's rename lookup with an option-shaped commit write nothing."""
    out = tmp_path / "out.txt"
    commit = commit.replace("OUT", str(out))
    repo = Repo(lay.repo)
    v = check({"id": 1, "source": {"kind": "commit", "location": commit}, "quote": "q",
               "fingerprint": {"commit": commit}}, repo)
    assert isinstance(v, Skip) and "not in this repository" in v.reason and not out.exists()
    v = check(_fact("gone.txt:1", "q", {"path": "gone.txt", "commit": commit}), repo)
    assert v.verdict == "stale" and not out.exists()
