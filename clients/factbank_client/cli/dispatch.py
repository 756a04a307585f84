"""`factbank dispatch`: run an agent headless on a task and watch its log live;
the same runs the dashboard shows (factbank_client/dispatch)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from factbank_client import render
from factbank_client.cli import common
from factbank_common.commands import CommandError
from factbank_common.inert import json_inert
from factbank_common.output import print_json, print_table

POLL = 0.2  # seconds between looks at the log while following a run


def register(sub) -> None:
    p = sub.add_parser(
        "dispatch", help="run Claude Code, Codex or Pi headless on a task, with a live log",
        description="Run an agent headless on a task in a repository, with factbank's hooks "
        "active (its normal config: the shared context loads at session start), and stream "
        "its log live: messages, shell commands with their exit codes, file edits. The run "
        "is recorded on the project's timeline and kept on disk: it survives this terminal "
        "(--detach, or `factbank dispatch show ID --follow` from another one). Exit code: "
        "the agent's.")
    actions = p.add_subparsers(dest="dispatch_command", metavar="AGENT|ACTION")
    from factbank_client.dispatch import AGENTS, LABELS

    for agent in AGENTS:
        a = actions.add_parser(agent, help=f"run {LABELS[agent]} on a task",
                               description=f"Run {LABELS[agent]} headless on TASK.")
        a.add_argument("task", help="what the agent should do")
        a.add_argument("--repo", default=".", help="the repository to run in (default: here)")
        a.add_argument("--detach", action="store_true",
                       help="print the run's id and return; it runs on")
        a.add_argument("--permissions", choices=("default", "full"), default="default",
                       help="default: edits allowed (Claude acceptEdits, Codex workspace-write "
                       "sandbox), shell commands as your harness config allows; full: no "
                       "permission checks, no sandbox")
        a.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="stop the agent after this long (the run fails: timed out)")
        a.add_argument("--json", action="store_true",
                       help="print each event as a JSON line, then the run")
        a.set_defaults(func=cmd_run, agent=agent)

    ls = actions.add_parser("list", help="the runs, newest first")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(func=cmd_list)

    show = actions.add_parser("show", help="a run's record and log")
    show.add_argument("id", help="the run's id (`factbank dispatch list`)")
    show.add_argument("--follow", "-f", action="store_true",
                      help="keep printing the log until the run ends")
    show.add_argument("--json", action="store_true", help="print JSON for scripts")
    show.set_defaults(func=cmd_show)

    h = actions.add_parser("handoff", help="hand a finished run over to the next agent",
                           description="Leave a handoff for the next session in the run's "
                           "project: what the run did (task, outcome, files edited, commands, "
                           "its last message). It appears once, in that session's start block.")
    h.add_argument("id", help="the run's id")
    common.add_handoff_to_option(h)
    h.add_argument("--json", action="store_true", help="print JSON for scripts")
    h.set_defaults(func=cmd_handoff)
    p.set_defaults(func=lambda _args: (p.print_help(), 2)[1])  # `factbank dispatch` alone


def _store():
    from factbank_client.dispatch import RunStore

    return RunStore()


def _run(store, run_id: str):
    run = store.get(run_id)
    if run is None:
        raise CommandError(f"no run {run_id!r}: `factbank dispatch list` shows the runs")
    return run


def _print_event(event, as_json: bool) -> None:
    if as_json:
        print(json_inert(json.dumps(event.to_dict(), ensure_ascii=False)), flush=True)
    else:
        print(render.dispatch_event_line(event.to_dict()), flush=True)


def follow(store, run_id: str, *, seen: list[int] | None = None, as_json: bool = False):
    """Print the run's events as they come until it has ended; returns the final Run.
    `seen[0]` is the last seq printed (kept across a Ctrl-C, so the end is not skipped)."""
    seen = seen if seen is not None else [0]
    while True:
        run = store.get(run_id)
        for event in store.events(run_id, after=seen[0]):
            _print_event(event, as_json)
            seen[0] = event.seq
        if run is None or run.finished:
            for event in store.events(run_id, after=seen[0]):  # what came with the end
                _print_event(event, as_json)
                seen[0] = event.seq
            return store.get(run_id) or run
        time.sleep(POLL)


def cmd_run(args) -> int:
    from factbank_client.dispatch import DispatchError, start

    store = _store()
    try:
        run = start(store, args.agent, args.task, Path(args.repo),
                    permissions=args.permissions, timeout=args.timeout)
    except DispatchError as exc:
        raise CommandError(str(exc)) from None
    if args.detach:
        if args.json:
            print_json(run.to_dict())
        else:
            print(f"run {run.id}: {args.agent} started in {run.repo}; follow it with "
                  f"factbank dispatch show {run.id} --follow")
        return 0
    if not args.json:
        print(f"run {run.id}: {args.agent} in {run.repo} (Ctrl-C cancels it; --detach "
              "leaves it running)", file=sys.stderr)
    seen = [0]
    try:
        final = follow(store, run.id, seen=seen, as_json=args.json)
    except KeyboardInterrupt:
        store.cancel(run.id)
        follow(store, run.id, seen=seen, as_json=args.json)
        print(f"run {run.id} cancelled", file=sys.stderr)
        return 130
    if args.json:
        print(json_inert(json.dumps(final.to_dict(), ensure_ascii=False)))
    else:
        for line in render.dispatch_run_lines(final.to_dict()):
            print(line, file=sys.stderr)
    if final.exit_code is None:
        return 1
    return final.exit_code if 0 <= final.exit_code < 256 else 1


def cmd_list(args) -> int:
    runs = _store().list(limit=args.limit)
    if args.json:
        print_json({"runs": [r.to_dict() for r in runs]})
        return 0
    if not runs:
        print("no runs yet: factbank dispatch claude|codex|pi \"TASK\"", file=sys.stderr)
        return 0
    print_table(*render.dispatch_run_rows([r.to_dict() for r in runs]))
    return 0


def cmd_show(args) -> int:
    store = _store()
    run = _run(store, args.id)
    if args.json and not args.follow:
        print_json({"run": run.to_dict(),
                    "events": [e.to_dict() for e in store.events(run.id)]})
        return 0
    if not args.json:
        for line in render.dispatch_run_lines(run.to_dict()):
            print(line)
        print()
    if args.follow:
        run = follow(store, run.id, as_json=args.json)
    else:
        for event in store.events(run.id):
            _print_event(event, False)
    return 0


def cmd_handoff(args) -> int:
    from factbank_client.dispatch import DispatchError, make_handoff

    store = _store()
    run = _run(store, args.id)
    try:
        with common.client() as client:
            handoff_id = common.call(make_handoff, run, client, to_agent=args.to_agent,
                                     store=store)
    except DispatchError as exc:
        raise CommandError(str(exc)) from None
    run = store.get(run.id) or run
    if args.json:
        print_json({"handoff_id": handoff_id, "run": run.to_dict()})
    else:
        print(render.dispatch_handoff_line(run.to_dict(), handoff_id, args.to_agent))
    return 0
