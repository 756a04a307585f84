"""The local write-gate check for file sources: the quote must really be in the file."""

from __future__ import annotations

import pytest

from factbank_client.client import check_file_quote
from factbank_client.errors import QuoteNotFound

YAML = "service: api\nserver:\n  host: 0.0.0.0\n  port:   8080\n  workers: 4\n"


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "api.yaml").write_text(YAML, "utf-8")
    (tmp_path / "notes.md").write_text("构建命令是 make build，\n不要用 npm。\n", "utf-8")
    return tmp_path


def test_quote_found_with_whitespace_normalised(repo):
    got = check_file_quote("deploy/api.yaml", "port: 8080", cwd=repo, root=repo)
    assert got.location == "deploy/api.yaml" and got.lines == [4]


def test_quote_spanning_lines(repo):
    got = check_file_quote("deploy/api.yaml:3", "host: 0.0.0.0\n port: 8080", cwd=repo,
                           root=repo)
    assert got.location == "deploy/api.yaml:3" and got.lines == [3]
    # A range that covers any line of the quote is accepted.
    assert check_file_quote("deploy/api.yaml:4-5", "host: 0.0.0.0 port: 8080", cwd=repo,
                            root=repo).location == "deploy/api.yaml:4-5"


def test_quote_inside_a_line_and_in_chinese(repo):
    assert check_file_quote("notes.md:1", "make build", cwd=repo).lines == [1]
    assert check_file_quote("notes.md", "不要用 npm", cwd=repo).lines == [2]


def test_wrong_line_names_the_right_one(repo):
    with pytest.raises(QuoteNotFound, match=r"at line 4, not 2; use deploy/api.yaml:4"):
        check_file_quote("deploy/api.yaml:2", "port: 8080", cwd=repo)


@pytest.mark.parametrize(
    ("location", "quote", "words"),
    [
        ("deploy/api.yaml", "port: 9090", "not in deploy/api.yaml"),
        ("deploy/api.yaml", "port 8080", "not in"),  # punctuation is not whitespace
        ("deploy/missing.yaml:3", "x", "not found"),
        ("deploy/api.yaml", "   ", "need a file path and a quote"),
    ],
)
def test_refusals(repo, location, quote, words):
    with pytest.raises(QuoteNotFound, match=words):
        check_file_quote(location, quote, cwd=repo)


def test_location_is_made_relative_to_the_repository(repo):
    sub = repo / "deploy"
    got = check_file_quote("api.yaml:4", "port: 8080", cwd=sub, root=repo)
    assert got.location == "deploy/api.yaml:4"
    absolute = check_file_quote(str(repo / "deploy" / "api.yaml"), "workers: 4", cwd=sub,
                                root=repo)
    assert absolute.location == "deploy/api.yaml"
    # Outside the repository (or without one) the path is kept as given.
    assert check_file_quote("api.yaml", "workers: 4", cwd=sub).location == "api.yaml"
