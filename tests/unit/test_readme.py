"""The README is the user's path, and what CI and the docs rely on in it holds:
the test command `.ci/run` extracts, the order of the path, and every link to a file or a
heading in this repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "CONTRIBUTING.md", "docs/evals.md")


def test_ci_finds_the_test_command_where_it_looks():
    """`.ci/run`'s own awk: the second line after the marker is the whole suite: `tests/run`,
    whose two pytest processes are `tests` less some directories and those directories."""
    cmd = subprocess.run(["awk", "/<!-- test-command -->/{getline; getline; print; exit}",
                          "README.md"], cwd=ROOT, capture_output=True, text=True).stdout
    assert cmd.startswith("python3 -m venv .venv && ") and " tests/run && " in cmd
    script = (ROOT / "tests" / "run").read_text("utf-8")
    assert '.venv/bin/pytest -q -p no:cacheprovider "${SECOND[@]}" "$@"' in script
    assert '.venv/bin/pytest -q tests "${ignore[@]}" "$@"' in script
    assert 'ignore+=("--ignore=$dir")' in script


def test_the_users_path_comes_first_and_contributors_last():
    heads = re.findall(r"^## (.+)$", (ROOT / "README.md").read_text("utf-8"), re.M)
    path = ["Install", "Start", "Log in", "Save a fact", "Connect your agents", "Stop",
            "Share with a team", "Back up", "Uninstall"]
    found = [next(i for i, h in enumerate(heads) if step in h) for step in path]
    assert found == sorted(found) and found[0] == 0, heads
    assert heads[-1] == "Development", heads


def test_the_first_add_is_short():
    text = (ROOT / "README.md").read_text("utf-8")
    first = next(line for line in text.splitlines() if line.startswith("factbank add "))
    assert len(first) <= 100 and "--quote" in first


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


@pytest.mark.parametrize("page", PAGES)
def test_every_link_to_this_repository_resolves(page):
    source = ROOT / page
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", source.read_text("utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", file.read_text("utf-8"), re.M)}
            if anchor not in slugs:
                broken.append(target)
    assert not broken, broken
