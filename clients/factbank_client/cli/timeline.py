"""The timeline commands: `timeline` shows what just happened in a project (any
machine, any agent, any member); `handoff` leaves a note for the next session. Neither ever
writes a fact."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from factbank_client import render
from factbank_client.cli import common
from factbank_client.cli.common import call, command, show
from factbank_client.project import repo_root
from factbank_client.settings import settings
from factbank_common.commands import CommandError
from factbank_common.output import print_json, print_table


def register(sub) -> None:
    with command(
        sub, "timeline", cmd_timeline,
        help="what just happened in this project: sessions, files, commands",
        description="The project's timeline, newest first: sessions started and ended, files "
        "touched, commands run (with exit codes), handoffs and conflicts, from every agent, "
        "machine and member of your banks. Timeline entries are never facts.") as p:
        common.add_project_option(p)
        p.add_argument("--all-projects", action="store_true",
                       help="every project of the bank, not just this one")
        p.add_argument("--since", help="how far back: 30m, 2h, 3d, 1w or an ISO time "
                                       "(default: everything kept)")
        p.add_argument("--limit", type=int, default=100,
                       help="at most this many events (default 100)")

    with command(
        sub, "handoff", cmd_handoff, help="leave a note for the next session in this project",
        description="Leave a note for the next session in this project: any agent, or only "
        "--to AGENT (claude, codex or pi) or --to-member MEMBER. It appears once, in "
        "that session's start block, and is then marked delivered. It may point at files and "
        "facts by id. A handoff is not a fact.") as p:
        p.add_argument("text", help="what the next session should know or do")
        common.add_handoff_to_option(p)
        p.add_argument("--to-member", metavar="MEMBER",
                       help="only a session of this bank member receives it")
        p.add_argument("--file", dest="files", action="append", default=[], metavar="PATH",
                       help="a file it is about (repeatable; stored relative to the repo root)")
        p.add_argument("--fact", dest="facts", action="append", default=[], type=int,
                       metavar="ID", help="a fact it points at, by id (repeatable)")
        common.add_project_option(p)
        p.add_argument("--bank",
                       help="bank label (default: team if configured, else personal)")


def relative_to_repo(path: str, cwd: Path | None = None) -> str:
    """`path` relative to the repository root (as given when outside it)."""
    cwd = cwd or Path.cwd()
    root = repo_root(cwd)
    full = (cwd / path).resolve()
    if root is not None:
        try:
            return full.relative_to(root).as_posix()
        except ValueError:
            pass
    return path


def cmd_timeline(args) -> int:
    project = None if args.all_projects else common.project(args)
    if not args.all_projects and project is None:
        raise CommandError("not in a git repository: pass --project KEY or --all-projects")
    with common.client() as client:
        events = call(client.timeline, project=project, since=args.since, limit=args.limit)
    if args.json:
        print_json({"project": project, "events": events})
        return 0
    if not events:
        print(f"nothing on the timeline of {project or 'any project'}"
              + (f" since {args.since}" if args.since else ""), file=sys.stderr)
        return 0
    print_table(*render.timeline_rows(events, datetime.now(UTC), projects=args.all_projects))
    return 0


def cmd_handoff(args) -> int:
    project = common.project(args)
    if project is None:
        raise CommandError("not in a git repository: pass --project KEY")
    if not args.text.strip():
        raise CommandError("a handoff needs some text")
    files = [relative_to_repo(f) for f in args.files]
    with common.client() as client:
        out = call(client.handoff, args.text, project=project, to_agent=args.to_agent,
                   to_member=args.to_member, files=files, fact_ids=args.facts, bank=args.bank,
                   session_id=settings.session_id or None)
    return show(args, out, lambda: [render.handoff_line(out, project)])
