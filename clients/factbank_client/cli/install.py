"""`factbank install|uninstall claude|codex|pi|all|git [--dry-run]`: hooks, MCP, instructions;
`git` is this repository's post-commit verify (factbank_client/gitinstall.py), never part of
`all` (which is about the harnesses in your home directory)."""

from __future__ import annotations

import sys

from factbank_client.cli.main import CommandError

CHOICES = ("claude", "codex", "pi", "gemini", "qwen", "opencode", "copilot", "all", "git")
CODEX_TRUST_HELP = (
    "Codex runs hooks only after you trust them: start `codex`, type /hooks and trust the "
    "three factbank hooks, or run `factbank install codex --trust`. Re-installing from the "
    "same Python keeps the trust; from another path, trust them again."
)


def register(sub) -> None:
    p = sub.add_parser("install", help="wire factbank into Claude Code, Codex and/or Pi",
                       description="Registers factbank's hooks, MCP server and instruction "
                       "block (Claude Code, Codex) or its extension and instruction block "
                       "(Pi) in your home directory. Re-running replaces them in place.")
    p.add_argument("harness", nargs="+", choices=CHOICES,
                   help="claude, codex, pi, gemini, qwen, opencode, copilot, or all (the "
                        "last four only where present)")
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.add_argument("--trust", action="store_true",
                   help="Codex: mark factbank's hooks trusted (asks `codex app-server`)")
    p.add_argument("--codex-bin", default=None, help="the codex binary for --trust")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("uninstall", help="remove exactly what `factbank install` added")
    p.add_argument("harness", nargs="+", choices=CHOICES,
                   help="claude, codex, pi, or all")
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.set_defaults(func=cmd_uninstall)


def _show(plan, dry_run: bool, verb: str) -> None:
    if plan.empty:
        print(f"factbank: nothing to {verb}; already up to date")
        return
    if dry_run:
        sys.stdout.write(plan.diff())
        print(f"(dry run: {len(plan.changes)} file(s) would change; nothing written)")
        return
    for c in plan.changes:
        what = "created" if c.old is None else "deleted" if c.new is None else "updated"
        print(f"{what} {c.path}")


def _git(args, verb: str) -> None:
    from pathlib import Path

    from factbank_client import gitinstall, hookverify, installer

    try:
        if verb == "install":
            steps = gitinstall.install(Path.cwd(), installer.python_exe(), hookverify.log_path(),
                                       dry_run=args.dry_run)
        else:
            steps = gitinstall.uninstall(Path.cwd(), dry_run=args.dry_run)
    except gitinstall.GitInstallError as exc:
        raise CommandError(str(exc)) from None
    for step in steps:
        print(f"{'(dry run) would have ' if args.dry_run else ''}{step.action}: {step.path}")


def cmd_install(args) -> int:
    from factbank_client import installer

    if "git" in args.harness:
        _git(args, "install")
        args.harness = [h for h in args.harness if h != "git"]
        if not args.harness:
            return 0
    paths = installer.Paths.from_env()
    harnesses = installer.expand(args.harness, paths)
    try:
        plan = installer.plan_install(harnesses, paths)
    except installer.InstallError as exc:
        raise CommandError(str(exc)) from None
    _show(plan, args.dry_run, "install")
    for note in plan.notes:
        print(f"note: {note}")
    if args.dry_run:
        return 0
    installer.apply(plan)
    if "codex" in harnesses:
        if args.trust:
            from factbank_client import codex_trust

            try:
                keys = codex_trust.trust(paths, args.codex_bin)
            except installer.InstallError as exc:
                raise CommandError(str(exc)) from None
            print(f"trusted {len(keys)} factbank hook(s) in {paths.codex_config()}")
        else:
            print(f"note: {CODEX_TRUST_HELP}")
    if "pi" in harnesses:
        print("note: Pi loads the extension at its next start (or /reload).")
    return 0


def cmd_uninstall(args) -> int:
    from factbank_client import installer

    if "git" in args.harness:
        _git(args, "uninstall")
        args.harness = [h for h in args.harness if h != "git"]
        if not args.harness:
            return 0
    paths = installer.Paths.from_env()
    try:
        plan = installer.plan_uninstall(installer.expand(args.harness, every=True), paths)
    except installer.InstallError as exc:
        raise CommandError(str(exc)) from None
    _show(plan, args.dry_run, "uninstall")
    if not args.dry_run:
        installer.apply(plan)
    return 0
