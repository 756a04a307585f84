"""The timeline commands (issue 15): `timeline` shows what just happened in a project (any
machine, any agent, any member); `handoff` leaves a note for the next session. Neither ever
writes a fact."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from factbank_client import config as client_config
from factbank_client.cli.main import CommandError
from factbank_client.cli.output import add_json_flag, print_json, print_table
from factbank_client.client import Client, FactbankError
from factbank_client.project import project_key, repo_root


def register(sub) -> None:
    p = sub.add_parser(
        "timeline", help="what just happened in this project: sessions, files, commands",
        description="The project's timeline, newest first: sessions started and ended, files "
        "touched, commands run (with exit codes), handoffs and conflicts, from every agent, "
        "machine and member of your banks. Timeline entries are never facts.")
    p.add_argument("--project", help="project key (default: this repository's)")
    p.add_argument("--all-projects", action="store_true",
                   help="every project of the bank, not just this one")
    p.add_argument("--since", help="how far back: 30m, 2h, 3d, 1w or an ISO time "
                                   "(default: everything kept)")
    p.add_argument("--limit", type=int, default=100,
                   help="at most this many events (default 100)")
    add_json_flag(p)
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser(
        "handoff", help="leave a note for the next session in this project",
        description="Leave a note for the next session in this project: any agent, or only "
        "--to AGENT (e.g. codex, claude-code, pi) or --to-member MEMBER. It appears once, in "
        "that session's start block, and is then marked delivered. It may point at files and "
        "facts by id. A handoff is not a fact.")
    p.add_argument("text", help="what the next session should know or do")
    p.add_argument("--to", dest="to_agent", metavar="AGENT",
                   help="only a session of this agent receives it")
    p.add_argument("--to-member", metavar="MEMBER",
                   help="only a session of this bank member receives it")
    p.add_argument("--file", dest="files", action="append", default=[], metavar="PATH",
                   help="a file it is about (repeatable; stored relative to the repo root)")
    p.add_argument("--fact", dest="facts", action="append", default=[], type=int,
                   metavar="ID", help="a fact it points at, by id (repeatable)")
    p.add_argument("--project", help="project key (default: this repository's)")
    p.add_argument("--bank", help="bank label (default: team if configured, else personal)")
    add_json_flag(p)
    p.set_defaults(func=cmd_handoff)


def _client() -> Client:
    return Client(client_config.load())


def _project(args) -> str | None:
    return args.project or project_key(Path.cwd())


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


def _ago(at: str | None, now: datetime) -> str:
    if not at:
        return "-"
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return at
    seconds = int((now - when).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def _what(e: dict) -> str:
    kind = e.get("kind")
    if kind == "file":
        return f"{e.get('path', '')}" + (f" ({e['tool']})" if e.get("tool") else "")
    if kind == "command":
        command = " ".join(str(e.get("command", "")).split())
        if len(command) > 80:
            command = command[:79] + "…"
        return f"$ {command}" + (f"  -> {e['exit_code']}" if "exit_code" in e else "")
    if kind == "session_start":
        return "session started" + (f" in {e['cwd']}" if e.get("cwd") else "")
    if kind == "session_end":
        return "session ended"
    return str(e.get("detail") or "")


def cmd_timeline(args) -> int:
    project = None if args.all_projects else _project(args)
    if not args.all_projects and project is None:
        raise CommandError("not in a git repository: pass --project KEY or --all-projects")
    with _client() as client:
        try:
            events = client.timeline(project=project, since=args.since, limit=args.limit)
        except FactbankError as exc:
            raise CommandError(str(exc)) from None
    if args.json:
        print_json({"project": project, "events": events})
        return 0
    if not events:
        print(f"nothing on the timeline of {project or 'any project'}"
              + (f" since {args.since}" if args.since else ""), file=sys.stderr)
        return 0
    now = datetime.now(UTC)
    rows = [
        {
            "when": _ago(e.get("at"), now),
            "who": "/".join(x for x in (e.get("member"), e.get("agent")) if x) or "-",
            "machine": e.get("machine") or "-",
            "branch": e.get("branch") or "-",
            "kind": e.get("kind"),
            "what": _what(e),
        }
        for e in events
    ]
    columns = ["when", "who", "machine", "branch", "kind", "what"]
    if args.all_projects:
        for row, e in zip(rows, events, strict=True):
            row["project"] = e.get("project") or "-"
        columns.insert(4, "project")
    print_table(rows, columns)
    return 0


def cmd_handoff(args) -> int:
    project = _project(args)
    if project is None:
        raise CommandError("not in a git repository: pass --project KEY")
    if not args.text.strip():
        raise CommandError("a handoff needs some text")
    files = [relative_to_repo(f) for f in args.files]
    with _client() as client:
        try:
            out = client.handoff(
                args.text, project=project, to_agent=args.to_agent, to_member=args.to_member,
                files=files, fact_ids=args.facts, bank=args.bank,
                session_id=os.environ.get("FACTBANK_SESSION_ID") or None,
            )
        except FactbankError as exc:
            raise CommandError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    target = out.get("to_agent") or out.get("to_member") or "the next session"
    print(f"handoff #{out['id']} for {target} in {project} ({out['bank']} bank): "
          "it appears once, in that session's start block")
    return 0
