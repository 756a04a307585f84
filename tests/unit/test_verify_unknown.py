"""Stale needs evidence: a teammate's commit this checkout has not fetched is
unknown here, never stale; a commit that is here but that no ref reaches any more (a rebase
or a force-push dropped it) is stale; a reachable one is fresh. Real git repositories: a
"teammate" clone commits and pushes, this clone has not fetched yet."""

from __future__ import annotations

from pathlib import Path

from factbank_client.staleness.verify import Repo, Skip, Verdict, check
from tests.conftest import git


def _commit_fact(commit: str) -> dict:
    return {"id": 7, "source": {"kind": "commit", "location": commit}, "quote": "q",
            "fingerprint": {"commit": commit}}


def test_unfetched_is_unknown_unreachable_is_stale_reachable_is_fresh(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for clone in (mine, theirs):
        git(tmp_path, "clone", "-q", str(origin), str(clone))
    (mine / "a.txt").write_text("one\n")
    git(mine, "add", "a.txt")
    git(mine, "commit", "-q", "-m", "first")
    git(mine, "push", "-q", "origin", "HEAD:main")
    git(theirs, "pull", "-q", "origin", "main")
    (theirs / "b.txt").write_text("two\n")
    git(theirs, "add", "b.txt")
    git(theirs, "commit", "-q", "-m", "a teammate's")
    git(theirs, "push", "-q", "origin", "HEAD:main")
    teammates = git(theirs, "rev-parse", "HEAD").strip()
    first = git(mine, "rev-parse", "HEAD").strip()

    # not fetched here: unknown (skipped, listed), never stale
    verdict = check(_commit_fact(teammates), Repo(mine))
    assert isinstance(verdict, Skip) and "not fetched" in verdict.reason
    # fetched: fresh
    git(mine, "fetch", "-q", "origin")
    verdict = check(_commit_fact(teammates), Repo(mine))
    assert isinstance(verdict, Verdict) and verdict.verdict == "fresh"
    # here but dropped by every ref (an amended commit on a local-only branch): stale
    git(mine, "checkout", "-q", "-b", "side")
    (mine / "c.txt").write_text("three\n")
    git(mine, "add", "c.txt")
    git(mine, "commit", "-q", "-m", "side work")
    dropped = git(mine, "rev-parse", "HEAD").strip()
    git(mine, "checkout", "-q", "main")
    git(mine, "branch", "-q", "-D", "side")
    verdict = check(_commit_fact(dropped), Repo(mine))
    assert isinstance(verdict, Verdict) and verdict.verdict == "stale"
    assert "no longer reachable" in verdict.reason
    assert check(_commit_fact(first), Repo(mine)).verdict == "fresh"
