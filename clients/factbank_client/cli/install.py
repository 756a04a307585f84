"""`factbank install|uninstall claude|codex|pi|all|git [--dry-run]`: hooks, MCP, instructions;
`git` is this repository's post-commit verify (factbank_client/install/git.py), never part of
`all` (which is about the harnesses in your home directory)."""

from __future__ import annotations

import sys

from factbank_client.errors import GitInstallError, InstallError
from factbank_common.commands import CommandError
from factbank_common.output import add_json_flag, dry_run_line, file_line, print_json

CHOICES = ("claude", "codex", "pi", "gemini", "qwen", "opencode", "copilot", "all", "git")
HARNESS_HELP = ("claude, codex, pi, gemini, qwen, opencode, copilot, all (each of those that "
                "is on this machine), or git (this repository's post-commit hook)")
CODEX_TRUST_HELP = (
    "Codex runs hooks only after you trust them: start `codex`, type /hooks and trust the "
    "three factbank hooks, or run `factbank install codex --trust`. Re-installing from the "
    "same Python keeps the trust; from another path, trust them again."
)


def register(sub) -> None:
    p = sub.add_parser("install", help="wire factbank into Claude Code, Codex and/or Pi, or "
                       "this repository's git hook",
                       description="Registers factbank's hooks, MCP server and instruction "
                       "block (Claude Code, Codex) or its extension and instruction block "
                       "(Pi) in your home directory (and the same for Gemini CLI, Qwen Code, "
                       "OpenCode and Copilot CLI: docs/harnesses.md). Re-running replaces them "
                       "in place. `git` "
                       "adds a post-commit hook to this repository that re-checks its facts "
                       "after each commit (`factbank verify`); it is not part of `all`. "
                       "--dry-run shows the diff and writes nothing.")
    p.add_argument("harness", nargs="+", choices=CHOICES, help=HARNESS_HELP)
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.add_argument("--trust", action="store_true",
                   help="Codex: mark factbank's hooks trusted (asks `codex app-server`)")
    p.add_argument("--codex-bin", default=None, help="the codex binary for --trust")
    p.add_argument("--pre-push", action="store_true",
                   help="git: also a pre-push hook that reports the facts the pushed commits "
                        "would make stale (`factbank verify --diff`); FACTBANK_PRE_PUSH=block "
                        "refuses such a push")
    add_json_flag(p)
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("uninstall", help="remove exactly what `factbank install` added",
                       description="Removes exactly what `factbank install` added, and gives "
                       "back every file it changed byte for byte (a git hook it chained is put "
                       "back). --dry-run shows the diff and writes nothing.")
    p.add_argument("harness", nargs="+", choices=CHOICES, help=HARNESS_HELP)
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    add_json_flag(p)
    p.set_defaults(func=cmd_uninstall)


def _action(c) -> str:
    return "created" if c.old is None else "deleted" if c.new is None else "updated"


def _show(plan, args, verb: str) -> None:
    if getattr(args, "json", False):
        return
    if plan.empty:
        print(f"factbank: nothing to {verb}; already up to date")
        return
    if args.dry_run:
        sys.stdout.write(plan.diff())
        print(dry_run_line(len(plan.changes)))
        return
    for c in plan.changes:
        print(file_line(_action(c), c.path))


def _json(plan, args, **extra) -> None:
    if getattr(args, "json", False):
        print_json({"dry_run": args.dry_run,
                    "changes": [{"path": str(c.path), "action": _action(c)}
                                for c in plan.changes],
                    "notes": list(plan.notes), **extra})


def _present(names: list[str], paths) -> tuple[list[str], list[str]]:
    """`all` means the harnesses on this machine; a harness named explicitly is installed
    even when absent. Returns (to install, skipped)."""
    from factbank_client.install import common
    from factbank_client.install import harnesses as installer

    chosen, skipped = [], []
    for name in names:
        for h in (common.HARNESSES if name == "all" else (name,)):
            if name == "all" and not installer.present(h, paths):
                skipped.append(h)
            elif h not in chosen:
                chosen.append(h)
    return chosen, [h for h in skipped if h not in chosen]


def _git_first(args, verb: str) -> bool:
    """With `git` among the targets, its step first, and `git` off the list: True when no
    harness is left to do."""
    if "git" not in args.harness:
        return False
    _git(args, verb)
    args.harness = [h for h in args.harness if h != "git"]
    return not args.harness


def _git(args, verb: str) -> None:
    """`install git` / `uninstall git`: each step as `file_line`; with --dry-run the diff it
    would write (the same unified diff as the harnesses'), then what has no text diff (a
    rename), then the same last line."""
    from pathlib import Path

    from factbank_client.hook import verify as hookverify
    from factbank_client.install import common
    from factbank_client.install import git as gitinstall

    try:
        if verb == "install":
            steps = gitinstall.install(Path.cwd(), common.python_exe(), hookverify.log_path(),
                                       dry_run=args.dry_run,
                                       pre_push=getattr(args, "pre_push", False))
        else:
            steps = gitinstall.uninstall(Path.cwd(), dry_run=args.dry_run)
    except GitInstallError as exc:
        raise CommandError(str(exc)) from None
    if getattr(args, "json", False):
        print_json({"dry_run": args.dry_run, "git": [{"action": step.action,
                                                      "path": str(step.path)}
                                                     for step in steps]})
        return
    if not args.dry_run:
        for step in steps:
            print(file_line(step.action, step.path, step.detail))
        return
    changes = [s for s in steps if s.action != "unchanged"]
    for step in steps:
        diff = common.Change(step.path, step.old, step.new).diff()
        sys.stdout.write(diff or f"(dry run) {file_line(step.action, step.path, step.detail)}\n")
    print(dry_run_line(len(changes)))


def cmd_install(args) -> int:
    from factbank_client.install import common
    from factbank_client.install import harnesses as installer

    if args.pre_push and "git" not in args.harness:
        raise CommandError("--pre-push is a git hook: `factbank install git --pre-push`")
    if _git_first(args, "install"):
        return 0
    paths = common.Paths.from_env()
    harnesses, skipped = _present(args.harness, paths)
    say = (lambda text: None) if args.json else print
    for h in skipped:
        say(f"skipped {h}: not on this machine (no config directory of its own, no "
            f"`{installer.HARNESS_BIN[h]}` on PATH); `factbank install {h}` installs it anyway")
    if not harnesses:
        raise CommandError("no harness found on this machine (Claude Code, Codex, Pi, Gemini "
                           "CLI, Qwen Code, OpenCode, Copilot CLI); name one to install it "
                           "anyway, e.g. `factbank install claude`")
    try:
        plan = installer.plan_install(harnesses, paths)
    except InstallError as exc:
        raise CommandError(str(exc)) from None
    _show(plan, args, "install")
    for note in plan.notes:
        say(f"note: {note}")
    if args.dry_run:
        _json(plan, args, harnesses=harnesses, skipped=skipped)
        return 0
    installer.apply(plan)
    trusted: list[str] = []
    if "codex" in harnesses:
        if args.trust:
            from factbank_client.install import codex_trust

            try:
                trusted = codex_trust.trust(paths, args.codex_bin)
            except InstallError as exc:
                raise CommandError(str(exc)) from None
            say(f"trusted {len(trusted)} factbank hook(s) in {paths.codex_config()}")
        else:
            say(f"note: {CODEX_TRUST_HELP}")
    if "pi" in harnesses:
        say("note: Pi loads the extension at its next start (or /reload).")
    _json(plan, args, harnesses=harnesses, skipped=skipped, trusted=trusted)
    return 0


def cmd_uninstall(args) -> int:
    from factbank_client.install import common
    from factbank_client.install import harnesses as installer

    if _git_first(args, "uninstall"):
        return 0
    paths = common.Paths.from_env()
    try:
        plan = installer.plan_uninstall(installer.expand(args.harness, every=True), paths)
    except InstallError as exc:
        raise CommandError(str(exc)) from None
    _show(plan, args, "uninstall")
    if not args.dry_run:
        installer.apply(plan)
    _json(plan, args)
    return 0
