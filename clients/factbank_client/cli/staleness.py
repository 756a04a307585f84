"""Sources change, facts follow, the client's half: `verify`, `rules candidates`,
`rules propose`, `migrate-native`. The judgement lives in factbank_client/staleness/verify.py,
the rule patch in factbank_client/rulepatch.py, the native memories in factbank_client/native.py;
these are the commands' skins."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from factbank_client import render
from factbank_client.cli import common
from factbank_client.cli.common import call, command, show
from factbank_client.errors import MigrateError, ProposeError
from factbank_client.project import repo_root
from factbank_common.commands import CommandError

HARNESS_CHOICES = ("claude", "codex", "pi")


def register(sub) -> None:
    with command(
        sub, "verify", cmd_verify,
        help="re-check this project's file- and commit-sourced facts as the last commit holds them",
        description="Each fact whose source is a file (or a commit) of this project is checked "
        "here: the quote still at its line is fresh; moved, its location is updated (the "
        "history records it); gone or changed, the fact turns stale with the reason and the "
        "new text around the old line (stale facts are never injected); a file renamed in git "
        "relocates the fact when the quote is in the new file; an unreachable commit is stale. "
        "The hooks run it in the background at session start and at each commit "
        "(`factbank install git`).") as p:
        common.add_project_option(p)
        p.add_argument("--all", action="store_true",
                       help="also re-check facts already stale (their reason and context are "
                            "refreshed; only a confirm with a fresh quote revives one)")
        p.add_argument("--bank", help="only this bank (default: every configured bank)")
        p.add_argument("--working-tree", action="store_true",
                       help="judge the files as they are now, uncommitted edits included, and "
                            "tell the bank (default: as HEAD holds them: only a commit is "
                            "evidence for the team)")
        p.add_argument("--quiet", action="store_true",
                       help="print only the summary line; when another verify of this "
                            "repository is running, ask it to run once more and leave "
                            "(what the hooks run)")
        change = p.add_mutually_exclusive_group()
        change.add_argument("--diff", metavar="BASE..HEAD",
                            help="report only (the bank is not changed): the facts whose "
                                 "quoted lines this range of commits touches, as they would "
                                 "be after it: would go stale, would move, unaffected "
                                 "(BASE...HEAD: from their merge base, as a pull request; "
                                 "BASE alone: up to HEAD)")
        change.add_argument("--staged", action="store_true",
                            help="the same report for what is staged (the index over HEAD)")
        p.add_argument("--markdown", action="store_true",
                       help="with --diff/--staged: the report as Markdown for a pull-request "
                            "comment, with the command that supersedes or confirms each fact")
        p.add_argument("--fail-on", choices=("stale", "moved", "never"), default="stale",
                       help="with --diff/--staged: exit 1 when a fact would go stale "
                            "(stale, the default), also when one would move (moved), or "
                            "never (report only); exit 2 when the check could not run")

    rules = sub.add_parser("rules", help="the rule-promotion gate: candidates, and proposals "
                           "a person merges (never applied)",
                           description="The rule-promotion gate: `candidates` lists claims "
                           "confirmed in at least two unrelated projects and not disputed since; "
                           "`propose ID --to FILE` writes one of them as a patch (or a branch "
                           "with one commit) for a person to merge. Nothing is ever applied to "
                           "your rule files.")
    rsub = rules.add_subparsers(dest="rules_command", metavar="{candidates,propose}")
    with command(rsub, "candidates", cmd_rule_candidates,
                 help="claims confirmed in at least two unrelated projects, with evidence"):
        pass
    with command(
        rsub, "propose", cmd_rule_propose,
        help="write a rule file patch (or a one-commit branch) for a candidate; never applies it",
        description="Writes the candidate as one line appended to the rule file, as a patch "
        "file (default) or as a branch with one commit, and shows it. Nothing is applied: the "
        "working tree, the index and the rule file stay as they are; a person merges it.") as p:
        p.add_argument("id", type=int, help="the candidate's fact id (`factbank rules candidates`)")
        p.add_argument("--to", required=True, metavar="AGENTS.md|CLAUDE.md|PATH",
                       help="the rule file, relative to the repository root")
        p.add_argument("--branch", nargs="?", const="", default=None, metavar="NAME",
                       help="make a branch with one commit instead of a patch (default name "
                            "factbank/rule-ID)")
        p.add_argument("--out", help="the patch file (default: .git/factbank/rule-ID.patch)")

    with command(
        sub, "migrate-native", cmd_migrate_native,
        help="propose a harness's own memories as candidate facts (nothing saved unasked)",
        description="Reads what Claude Code, Codex or Pi keeps as its own memory for this "
        "project (memory files, the fact lines of CLAUDE.md/AGENTS.md), backs those files up, "
        "and proposes each fact line as a candidate (source = file:line, quote = the line) "
        "through the server's write gate, redaction and dedupe without saving. Instruction "
        "lines are rules: left alone and listed. Nothing is saved until accepted "
        "(--accept-all, or one by one at a terminal). Running it again proposes nothing new.") \
            as p:
        p.add_argument("harness", choices=HARNESS_CHOICES,
                       help="whose memories: claude, codex or pi")
        p.add_argument("--dry-run", action="store_true",
                       help="show the candidates; no backup, nothing saved")
        p.add_argument("--accept-all", action="store_true",
                       help="save every candidate the gate accepts as new")
        p.add_argument("--category", default="project",
                       help="the category the facts go to (default project)")
        common.add_project_option(p)
        p.add_argument("--bank")


# --- verify ----------------------------------------------------------------------------------


def run_verify(client, root: Path, project: str, *, include_stale: bool = False,
               banks: list[str] | None = None, working_tree: bool = False) -> dict:
    """Judge every file/commit fact of `project` in each bank against `root` as its last
    commit holds it (or, with `working_tree`, its files as they are now), send the verdicts,
    and return the report (what `--json` prints)."""
    from factbank_client.staleness.verify import Skip, check, repo_for

    repo = repo_for(root, working_tree=working_tree)
    statuses = ["active", "stale"] if include_stale else ["active"]
    report: dict = {"project": project, "root": str(root), "verdicts": [], "skipped": [],
                    "banks": {}}
    for label in banks or client.banks:
        facts = list(client.list_facts(bank=label, project=project, statuses=statuses,
                                       source_kinds=["file", "commit"]))
        verdicts = []
        for fact in facts:
            v = check(fact, repo)
            v.bank = label
            (report["skipped"] if isinstance(v, Skip) else verdicts).append(v)
        if verdicts:
            report["banks"][label] = client.verify([v.wire() for v in verdicts],
                                                   project=project, bank=label)
        report["verdicts"].extend(verdicts)
    report["verdicts"] = [asdict(v) for v in report["verdicts"]]
    report["skipped"] = [asdict(s) for s in report["skipped"]]
    return report


def run_verify_diff(client, change, project: str, banks: list[str] | None = None) -> dict:
    """What `change` (verify.Change) would do to every active file fact of `project` in each
    bank: the report `--diff`/`--staged` prints. Nothing is sent to the bank."""
    from factbank_client.staleness.verify import effect_of

    labels = banks or list(client.banks)
    effects = []
    for label in labels:
        for fact in client.list_facts(bank=label, project=project, statuses=["active"],
                                      source_kinds=["file"]):
            effect = effect_of(fact, change)
            effect.bank = label
            effects.append(effect)
    return diff_report(effects, change, project, several_banks=len(labels) > 1)


def diff_report(effects: list, change, project: str, *, several_banks: bool = False) -> dict:
    from factbank_client.redact import redact
    from factbank_client.staleness.verify import command_for

    counts = {k: 0 for k in ("stale", "moved", "unaffected", "unknown")}
    listed = []
    for e in effects:
        counts[e.effect] += 1
        if e.effect == "unaffected" and not e.reason:
            continue
        row = asdict(e)
        # The new text comes from the change itself: what a comment shows holds no secret.
        for key in ("reason", "new_text"):
            if row[key]:
                row[key] = redact(row[key])
        row["command"] = command_for(row, change.label, bank=e.bank if several_banks else None)
        listed.append(row)
    order = {"stale": 0, "moved": 1, "unknown": 2, "unaffected": 3}
    listed.sort(key=lambda r: (order[r["effect"]], r["id"]))
    return {"project": project, "range": change.label, "base": change.base,
            "head": change.head or None, "checked": len(effects),
            "touched_files": len(change.touched), "counts": counts, "facts": listed}


def diff_exit(report: dict, fail_on: str) -> int:
    """0: nothing the policy fails on; 1: a fact would go stale (or move, with
    --fail-on moved). 2 (a CommandError) is a check that could not run."""
    counts = report["counts"]
    if fail_on == "never":
        return 0
    if counts["stale"] or (fail_on == "moved" and counts["moved"]):
        return 1
    return 0


def cmd_verify_diff(args, root: Path, project: str) -> int:
    from factbank_client.staleness.verify import ChangeError, change_of

    if args.quiet or args.all:
        raise CommandError("--diff/--staged report on a change: --quiet and --all are for "
                           "the verify that updates the bank")
    try:
        change = change_of(root, args.diff, staged=args.staged)
    except ChangeError as exc:
        raise CommandError(f"--diff: {exc}") from None
    with common.client() as client:
        report = call(run_verify_diff, client, change, project,
                      [args.bank] if args.bank else None)
    report["exit"] = diff_exit(report, args.fail_on)
    if args.markdown and not args.json:
        print(render.verify_diff_markdown(report), end="")
    else:
        show(args, report, lambda: render.verify_diff_lines(report))
    return report["exit"]


def cmd_verify(args) -> int:
    root = repo_root(Path.cwd())
    if root is None:
        raise CommandError("verify checks a repository's facts: run it inside one")
    project = common.project(args)
    if not project:
        raise CommandError("no project key here: pass --project")
    if args.diff is not None or args.staged:
        return cmd_verify_diff(args, root, project)
    if args.markdown or args.fail_on != "stale":
        raise CommandError("--markdown and --fail-on go with --diff or --staged")
    if not args.quiet:
        with common.client() as client:
            report = _verify(client, root, project, args)
        return show(args, report, lambda: render.verify_lines(report))
    return _verify_quietly(root, project, args)


def _verify(client, root: Path, project: str, args) -> dict:
    return call(run_verify, client, root, project, include_stale=args.all,
                banks=[args.bank] if args.bank else None, working_tree=args.working_tree)


def _verify_quietly(root: Path, project: str, args) -> int:
    """The hooks' run: one verify of this repository at a time, once more when a hook asked
    while it ran (staleness/runlock.py), one line (or one JSON report) per run for the log."""
    from factbank_client.staleness.runlock import run_once_more_if_asked

    def once() -> None:
        with common.client() as client:
            report = _verify(client, root, project, args)
        if args.json:
            show(args, report, lambda: [])
            return
        from datetime import UTC, datetime

        stale = [v["id"] for v in report["verdicts"] if v["verdict"] == "stale"]
        print(f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {root}: "
              f"{render.verify_lines(report)[-1]}"
              + (f" (stale: {render.id_list(stale)})" if stale else ""), flush=True)

    try:
        run_once_more_if_asked(root, once)
    except OSError as exc:
        raise CommandError(f"cannot take the verify lock: {exc.strerror or exc}") from None
    return 0


# --- rules -----------------------------------------------------------------------------------


def cmd_rule_candidates(args) -> int:
    with common.client() as client:
        data = call(client.rule_candidates)
    return show(args, {"candidates": data}, lambda: render.rule_candidate_lines(data))


def cmd_rule_propose(args) -> int:
    from factbank_client import rulepatch

    root = repo_root(Path.cwd())
    if root is None:
        raise CommandError("rules propose writes a patch in a git repository: run it in one")
    with common.client() as client:
        candidates = call(client.rule_candidates)
    cand = next((c for c in candidates if int(c["fact"]["id"]) == args.id), None)
    if cand is None:
        raise CommandError(
            f"fact #{args.id} is not a rule candidate: a claim must be confirmed in at least "
            "two unrelated projects and not disputed since (`factbank rules candidates`)")
    try:
        result = rulepatch.propose(root, cand, args.to, branch=args.branch, out=args.out)
    except ProposeError as exc:
        raise CommandError(str(exc)) from None
    return show(args, result, lambda: [result["show"].rstrip("\n"), result["note"]])


# --- migrate-native ---------------------------------------------------------------------------


def cmd_migrate_native(args) -> int:
    from factbank_client import native

    cwd = Path.cwd()
    project = common.project(args)
    with common.client() as client:
        try:
            plan = native.migrate(client, args.harness, cwd, project=project,
                                  category=args.category, dry_run=args.dry_run,
                                  accept_all=args.accept_all, bank=args.bank,
                                  ask=None if args.dry_run or args.accept_all or not
                                  sys.stdin.isatty() else native.ask_tty)
        except MigrateError as exc:
            raise CommandError(str(exc)) from None
        except Exception as exc:
            from factbank_client.errors import FactbankError

            if isinstance(exc, FactbankError):
                raise CommandError(str(exc)) from None
            raise
        found = None
        if any(c.get("saved") for c in plan.get("candidates", [])):
            from factbank_client.cli.enrich import backlog

            found = backlog(client, args.bank)
            plan["lacking_questions"] = found["lacking_questions"] if found else None
    from factbank_client.cli.enrich import backlog_lines

    return show(args, plan, lambda: render.migrate_lines(plan) + backlog_lines(found))
