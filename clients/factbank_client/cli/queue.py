"""`factbank queue`: the review queue (successors `verify` proposed when a quoted line changed,
corrections queued with `factbank supersede --queue`): list, accept (optionally edited),
reject. The server's write/queue.py says what accepting does."""

from __future__ import annotations

from collections.abc import Mapping

from factbank_client import render
from factbank_client.cli import common
from factbank_client.cli.common import call, command, show
from factbank_common.inert import inert

STATUS_CHOICES = ("pending", "accepted", "rejected", "withdrawn", "all")


def register(sub) -> None:
    q = sub.add_parser(
        "queue", help="the review queue: candidate facts waiting to be accepted or rejected",
        description="Candidate facts that nothing has stored yet: the successor `factbank "
        "verify` proposes when a commit changes the line a fact quotes (the same fact with the "
        "new line as its quote), and corrections queued with `factbank supersede --queue`. "
        "Accepting supersedes the old fact through the normal write path (reason \"source "
        "changed in <commit>\"); a rejected candidate is never proposed again for the same "
        "source text.")
    qsub = q.add_subparsers(dest="queue_command", metavar="{list,accept,reject}")
    with command(qsub, "list", cmd_list, help="candidates, oldest first (default: pending)",
                 description="The candidates of every configured bank (or --bank), oldest "
                 "first, each with the fact it would supersede as it stands now.") as p:
        p.add_argument("--status", choices=STATUS_CHOICES, default="pending",
                       help="pending (the default), accepted, rejected, withdrawn (a newer "
                            "proposal replaced it) or all")
        p.add_argument("--replaces", type=int, metavar="ID",
                       help="only candidates that would supersede fact ID")
        p.add_argument("--bank", help="only this bank (default: every configured bank)")
    with command(qsub, "accept", cmd_accept, fact=True,
                 help="store a candidate (edited first with the options given)",
                 description="Store the candidate ID: it supersedes the fact it replaces with "
                 "the candidate's reason (or is added, when it replaces none). --reword, "
                 "--category, --tag and --question edit it first (each list replaces the "
                 "candidate's).") as p:
        p.add_argument("--reword", metavar="CONTENT",
                       help="the claim as it should read now (its content)")
        p.add_argument("--category", help="another category")
        p.add_argument("--tag", action="append", dest="tags", metavar="TAG",
                       help="replace its tags (repeatable)")
        p.add_argument("--question", action="append", dest="questions", metavar="QUESTION",
                       help="replace its questions (repeatable)")
    with command(qsub, "reject", cmd_reject, fact=True,
                 help="reject a candidate: its text is not proposed again",
                 description="Reject the candidate ID. It is kept as rejected, so verify does "
                 "not propose the same source text for the same fact again.") as p:
        p.add_argument("--reason", default="", help="why (kept with the candidate)")


def candidate_lines(c: Mapping) -> list[str]:
    fact = c.get("fact") or {}
    src = fact.get("source") or {}
    head = (f"candidate {c['id']} ({inert(c.get('bank') or '', 40)}, {c['kind']}, "
            f"{c['status']})")
    if c.get("replaces"):
        head += f" supersedes #{c['replaces']}"
    lines = [head, f"  reason:  {inert(c.get('reason') or '')}"]
    was = c.get("was") or {}
    if was:
        lines.append(f"  was:     {inert(was.get('quote') or '', 200)}  "
                     f"({inert(was.get('location') or '', 200)})")
    lines.append(f"  quote:   {inert(fact.get('quote') or '', 200)}  "
                 f"({inert(src.get('location') or '', 200)})")
    lines.append(f"  content: {inert(fact.get('content') or '', 400)}")
    if c.get("result_fact"):
        lines.append(f"  stored as #{c['result_fact']}")
    return lines


def cmd_list(args) -> int:
    with common.client() as client:
        data = call(client.queue_list, status=args.status, fact=args.replaces,
                    banks=[args.bank] if args.bank else None)

    def lines() -> list[str]:
        if not data:
            return [f"no {args.status if args.status != 'all' else ''} candidates".replace(
                "  ", " ")]
        return [line for c in data for line in candidate_lines(c)]

    return show(args, {"candidates": data}, lines)


def cmd_accept(args) -> int:
    edits = {k: v for k, v in (("content", args.reword), ("category", args.category),
                               ("tags", args.tags), ("questions", args.questions))
             if v is not None}
    with common.client() as client:
        data = call(client.queue_accept, args.id, edits=edits or None, bank=args.bank)
    outcome = data["outcome"]
    return show(args, data, lambda: [
        *render.outcome_lines(outcome, note=False),
        f"  accepted candidate {args.id}"
        + (f": supersedes #{data['candidate']['replaces']} ({inert(data['candidate']['reason'])})"
           if data["candidate"].get("replaces") else "")])


def cmd_reject(args) -> int:
    with common.client() as client:
        data = call(client.queue_reject, args.id, args.reason, bank=args.bank)
    return show(args, data, lambda: [f"rejected candidate {args.id}: its text will not be "
                                     "proposed again for the same fact"])
