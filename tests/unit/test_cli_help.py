"""The CLI's help agrees with itself, as a class: 17 of 32 commands had no
description, `add CONTENT` but `supersede --content`, `install --help` left out `git`,
`install git --dry-run` showed no diff, and `created: PATH` beside `created PATH`.

Every check walks the whole parser `factbank` builds (every registered group of the
`factbank.commands` entry points, every subcommand), so a command added later is held to the
same rules without anyone listing it here; the one table below (the dry runs) fails when a new
`--dry-run` is not in it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from factbank_client import config as client_config
from factbank_client.cli import common as cli_common
from factbank_client.cli.main import build_parser, main
from factbank_client.client import Client


def parsers(parser: argparse.ArgumentParser | None = None) -> Iterator[argparse.ArgumentParser]:
    """`factbank` and every command and subcommand under it."""
    parser = parser or build_parser()
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a user sees (not -h, not subcommand lists, not hidden aliases)."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
            and a.help != argparse.SUPPRESS]


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


# --- descriptions and listings --------------------------------------------------------------


def test_every_command_and_subcommand_has_a_description():
    missing = [p.prog for p in parsers() if not (p.description or "").strip()]
    assert not missing, f"`COMMAND --help` opens with nothing for: {missing}"


def test_help_lists_every_subcommand_and_choice():
    unlisted, unnamed = [], []
    for p in parsers():
        subs = subcommands(p)
        if subs is not None:
            text = p.format_help()
            listed = {c.dest for c in subs._choices_actions}
            unlisted += [f"{p.prog} {name}" for name in subs.choices
                         if name not in listed or not re.search(rf"^\s+{re.escape(name)}\b",
                                                                text, re.M)]
        for action in arguments(p):
            if action.choices is None:
                continue
            help_text = (action.help or "") % {"default": action.default,
                                               "choices": ", ".join(map(str, action.choices))}
            unnamed += [f"{p.prog} {action.option_strings or action.dest}: {c}"
                        for c in action.choices
                        if not re.search(rf"\b{re.escape(str(c))}\b", help_text)]
    assert not unlisted, f"subcommands missing from their group's --help: {unlisted}"
    assert not unnamed, f"choices the argument's help does not name: {unnamed}"


# --- one concept, one spelling --------------------------------------------------------------

# Where one name is spelled two ways on purpose, and why. Everything else with the same name
# must be spelled the same everywhere (a positional stays positional, an option keeps its flag).
TWO_SPELLINGS = {
    # admin acts on a bank *name* given as its subject; the client's --bank picks one of the
    # banks configured here (personal or team), and admin audit filters by one.
    "bank": lambda prog, positional: not positional or prog.startswith("factbank admin"),
    # `admin bank policy NAME POLICY` sets it; `admin bank create --policy` is optional.
    "policy": lambda prog, positional: prog.startswith("factbank admin bank"),
    # Two concepts: `eval beir PATH` (a data folder), `mcp --path` (the HTTP route).
    "path": lambda prog, positional: prog in ("factbank eval beir", "factbank mcp"),
}

# A flag that takes other values than everywhere else, and why: `login --bank` creates the
# label, so it offers only the two the client knows; elsewhere --bank names any label saved.
OWN_VALUES = {("--bank", "factbank login")}

# Spellings of a concept the CLI already names otherwise: never offer them (visibly) again.
SYNONYMS = {
    "--output": "--out", "-o": "--out", "--outfile": "--out", "--dryrun": "--dry-run",
    "--dry": "--dry-run", "--content": "CONTENT (positional, as `add CONTENT`)",
    "--text": "CONTENT", "--claim": "CONTENT", "--fact": None, "--fact-id": "ID",
    "--banks": "--bank", "--proj": "--project", "--repo-root": "--repo", "--message": None,
}


def test_one_concept_has_one_spelling():
    forms: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    where: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    options: dict[tuple[str, str], set[tuple]] = defaultdict(set)
    synonyms, writers = [], []
    for p in parsers():
        visible = arguments(p)
        for a in visible:
            form = tuple(a.option_strings) or ("<positional>",)
            allowed = TWO_SPELLINGS.get(a.dest)
            if allowed is None or not allowed(p.prog, not a.option_strings):
                forms[a.dest].add(form)
                where[(a.dest, form)].append(p.prog)
            for flag in a.option_strings:
                if (flag, p.prog) not in OWN_VALUES:
                    options[(flag, a.dest)].add((a.metavar, tuple(a.choices or ())))
                if flag in SYNONYMS and not (flag == "--fact" and p.prog == "factbank handoff"):
                    synonyms.append(f"{p.prog} {flag} (say {SYNONYMS[flag]})")
        flags = {f for a in visible for f in a.option_strings}
        if {"--quote", "--category"} <= flags:  # it writes a fact: the claim is CONTENT
            content = [a for a in visible if a.dest == "content"]
            if not content or content[0].option_strings or content[0].metavar not in (
                    None, "CONTENT"):
                writers.append(p.prog)
    spelled_twice = {dest: {f: where[(dest, f)] for f in fs}
                     for dest, fs in forms.items() if len(fs) > 1}
    assert not spelled_twice, f"one name, two spellings: {spelled_twice}"
    differing = {k: v for k, v in options.items() if len(v) > 1}
    assert not differing, f"the same flag takes different values: {differing}"
    assert not synonyms, synonyms
    assert not writers, f"commands that write a fact without a positional CONTENT: {writers}"


def test_positionals_are_shown_as_the_docs_write_them():
    """`factbank add CONTENT`, `factbank get ID`: usage lines say what docs/cli.md says, and
    the same argument reads the same in every command."""
    shown: dict[str, set[str]] = defaultdict(set)
    for p in parsers():
        for a in arguments(p):
            if not a.option_strings and not a.choices:
                shown[a.dest].add(str(a.metavar))
    lower = {d: m for d, m in shown.items() if any(x != x.upper() for x in m)}
    assert not lower, lower
    assert not {d: m for d, m in shown.items() if len(m) > 1}
    assert shown["content"] == {"CONTENT"} and shown["id"] == {"ID"}


def test_the_older_supersede_content_option_still_parses():
    args = build_parser().parse_args(["supersede", "12", "--content", "new", "--reason", "r"])
    assert (args.content, args.ids, args.content_option) == ("12", [], "new")


# --- every --dry-run prints a diff or a plan ------------------------------------------------


@dataclass
class Sandbox:
    home: Path
    repo: Path
    sent: list[tuple[str, str]]

    def snapshot(self) -> dict[str, bytes]:
        return {str(f): f.read_bytes() for root in (self.home, self.repo)
                for f in sorted(root.rglob("*")) if f.is_file() or f.is_symlink()}


def _check_route(sent: list) -> Callable[[httpx.Request], httpx.Response]:
    """The ingest service's /v1/facts/check, the only route a migrate-native dry run may use:
    every fact is new."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        if request.url.path == "/v1/facts/check":
            facts = json.loads(request.content)["facts"]
            return httpx.Response(200, json={"results": [
                {"verdict": "new", "reasons": [], "redacted": [],
                 "possible_duplicate_of": []} for _ in facts]})
        return httpx.Response(404, json={"detail": "not in a dry run"})

    return handle


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch) -> Sandbox:
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "CLAUDE.md").write_text("# api\n\n- The API listens on port 8080.\n"
                                    "- Always run the tests before pushing.\n", "utf-8")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "XDG_CONFIG_HOME",
                "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(repo)
    sent: list[tuple[str, str]] = []
    cfg = client_config.ClientConfig(url="http://ingest", recall_url="http://recall",
                                     tokens={"personal": "fb_test"})
    monkeypatch.setattr(cli_common, "client", lambda: Client(
        cfg, http=httpx.Client(transport=httpx.MockTransport(_check_route(sent)))))
    return Sandbox(home, repo, sent)


DIFF = re.compile(r"^--- \S+\n\+\+\+ \S+\n@@ ", re.M)
DRY_RUN_END = re.compile(r"\(dry run: [1-9]\d* file\(s\) would change; nothing written\)\n\Z")


def _diff(out: str) -> bool:
    return bool(DIFF.search(out) and DRY_RUN_END.search(out))


def _installed(box: Sandbox) -> None:
    for argv in (["install", "claude"], ["install", "git"]):
        assert main(argv) == 0


# prog -> (set-up, the dry runs, what the output must be). A new --dry-run fails
# test_every_dry_run_is_in_the_table until it is added here.
DRY_RUNS: dict[str, tuple[Callable[[Sandbox], None] | None, list[list[str]],
                          Callable[[str], bool]]] = {
    "factbank install": (None, [["install", "claude"], ["install", "git"]], _diff),
    "factbank uninstall": (_installed, [["uninstall", "claude"], ["uninstall", "git"]], _diff),
    "factbank import-history": (
        None, [["import-history", "claude", "--dir", "{home}/.claude"]],
        lambda out: "transcript files since" in out and "dry run: nothing sent" in out),
    "factbank migrate-native": (
        None, [["migrate-native", "claude"]],
        lambda out: re.search(r"^CLAUDE\.md:3: The API listens on port 8080.*new", out, re.M)
        and "1 candidate fact(s)" in out),
}


def test_every_dry_run_is_in_the_table():
    with_dry_run = {p.prog for p in parsers()
                    if any("--dry-run" in a.option_strings for a in p._actions)}
    assert with_dry_run == set(DRY_RUNS)


@pytest.mark.parametrize("prog", sorted(DRY_RUNS))
def test_every_dry_run_prints_a_diff_or_a_plan_and_writes_nothing(prog, sandbox, capsys):
    setup, runs, shows = DRY_RUNS[prog]
    if setup:
        setup(sandbox)
    for argv in runs:
        argv = [a.format(home=sandbox.home) for a in argv]
        before = sandbox.snapshot()
        capsys.readouterr()
        assert main([*argv, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert shows(out), (argv, out)
        assert sandbox.snapshot() == before, f"{argv} --dry-run wrote"
    assert all(path == "/v1/facts/check" for _, path in sandbox.sent), sandbox.sent


# --- one wording for files written ----------------------------------------------------------

FILE_LINE = re.compile(r"^(\(dry run\) )?(created|updated|deleted|renamed|restored|unchanged) "
                       r"/\S+( \(.+\))?$")
WORDS = re.compile(r"\b(created|updated|deleted|removed|renamed|restored|unchanged)\b")


def test_files_written_are_reported_in_one_wording(sandbox, capsys):
    """Every line that says a file was created, updated or deleted, from every installer, for
    real and in a dry run, reads `VERB PATH`; a foreign git hook is chained and given back."""
    hook = sandbox.repo / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    lines = []
    for argv in (["install", "claude", "git"], ["install", "claude", "git"],
                 ["uninstall", "claude", "git", "--dry-run"], ["uninstall", "claude", "git"],
                 ["uninstall", "git"]):
        capsys.readouterr()
        assert main(argv) == 0
        lines += [line for line in capsys.readouterr().out.splitlines()
                  if WORDS.search(line.split(" (")[0]) and not line.startswith(("+", "-"))]
    odd = [line for line in lines if not FILE_LINE.match(line)]
    assert not odd, odd
    verbs = {FILE_LINE.match(line).group(2) for line in lines}
    assert {"created", "renamed", "restored", "deleted", "unchanged"} <= verbs, lines
    assert hook.read_text() == "#!/bin/sh\necho mine\n"

