"""`factbank enrich`: questions and tags for facts that have none, written by an agent.

`--list` hands out the batch (what the MCP tool `facts_to_enrich` gives an agent). Without
it, one headless agent run (factbank_client/dispatch, Claude Code or Codex: both reach the
MCP tool `enrich`) is given the batch and asked to write, for each fact, tags and 2-4
questions in English and Chinese from the fact alone, through `enrich` (the normal PATCH
path: redacted, re-embedded, audited). Afterwards each fact of the batch is read back and the
answer says how many now have both. What enriching buys on the agent-memory eval:
`python -m factbank_evals.enrich` (docs/evals.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from factbank_client.cli import common
from factbank_client.cli.common import call, show
from factbank_common.commands import CommandError
from factbank_common.inert import inert
from factbank_common.output import add_json_flag

AGENT_CHOICES = ("claude", "codex")  # the harnesses whose headless runs reach the MCP tools
TOOL = {"claude": "mcp__factbank__enrich", "codex": "factbank enrich"}


def register(sub) -> None:
    p = sub.add_parser(
        "enrich", help="have an agent write questions and tags for facts that have none",
        description="Facts that came by import, migrate-native or history backfill have no "
        "questions (and often no tags), so only searches worded like them find them. This "
        "runs one headless agent (Claude Code or Codex, as `factbank dispatch` does) on a "
        "batch of them: it writes 3-8 tags and 2-4 questions in English and Chinese for each, "
        "from the fact alone, through factbank's MCP tool `enrich` (redacted and audited like "
        "any edit). --list only prints the batch.")
    p.add_argument("--list", action="store_true",
                   help="print the batch of facts lacking questions or tags; run nothing")
    p.add_argument("--by", choices=AGENT_CHOICES, default="claude",
                   help="which agent writes them: claude (Claude Code, the default) or codex")
    p.add_argument("--limit", type=int, default=20,
                   help="at most this many facts in the batch (default 20)")
    p.add_argument("--lacking", choices=("questions", "tags", "either"), default="either",
                   help="facts without questions, without tags, or either (default)")
    p.add_argument("--bank", help="which of your configured banks (default personal)")
    common.add_project_option(p)
    p.add_argument("--repo", default=".", help="where the agent runs (default: here)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop the agent after this long (the run fails: timed out)")
    add_json_flag(p)
    p.set_defaults(func=cmd_enrich)


def backlog(client, bank: str | None) -> dict | None:
    """How many facts of `bank` have no writer questions: {"bank", "lacking_questions"}.

    Why the commands that bring facts in (`import`, `migrate-native`) ask: such facts are
    found only by searches worded like them, and nothing else tells whoever brought them in.
    On the agent-memory set imported bare, R@5 is 0.471; enriched, 0.930
    (evals/reports/2026-12-02/enrich.md). Four rounds of ranking work found no ranking that
    gives bare facts back their paraphrases in a bank of two languages
    (evals/reports/2026-12-06/bare-facts-4.md): questions are what does. None when the bank
    cannot say (a token without the read scope): the write itself went through."""
    from factbank_client.errors import FactbankError

    try:
        batch = client.enrich_batch(limit=1, lacking="questions", bank=bank)
    except FactbankError:
        return None
    return {"bank": batch["bank"], "lacking_questions": int(batch["remaining"])}


def backlog_lines(found: dict | None) -> list[str]:
    """The hint under an import's summary; nothing when no fact lacks questions."""
    if not found or not found["lacking_questions"]:
        return []
    return [f"{found['lacking_questions']} fact(s) in {found['bank']} have no writer questions, "
            "so only searches worded like them find them (agent-memory R@5 0.471 bare, 0.930 "
            "with questions and tags): `factbank enrich` has an agent write them "
            f"(`factbank enrich --list --lacking questions --bank {found['bank']}` shows them)"]


def task_text(facts: list[dict], agent: str) -> str:
    """What the agent is asked: the facts by id, each on one inert line."""
    lines = [
        f"Facts in the shared memory (factbank) have no questions or tags. For EACH fact "
        f"below, call the factbank MCP tool `enrich` ({TOOL[agent]}) once, with its id, 3-8 "
        "tags (topic, systems, their aliases; Chinese and English) and 2-4 questions a later "
        "teammate would type whose answer is the fact, in English AND Chinese, in everyday "
        "words, written from the fact alone. Do not change the facts' claims, save no new "
        "fact, and edit no file. Facts:"]
    lines += [inert(f"- #{f['id']} ({f['category']}) {f['content']}", 800) for f in facts]
    return "\n".join(lines)


def cmd_enrich(args) -> int:
    if args.limit < 1:
        raise CommandError("--limit: give at least 1")
    project = args.project or None
    with common.client() as client:
        batch = call(client.enrich_batch, limit=args.limit, lacking=args.lacking,
                     project=project, bank=args.bank)
    facts = batch["facts"]
    if args.list or not facts:
        return show(args, batch, lambda: [
            *(inert(f"#{f['id']} ({f['category']}; {len(f.get('tags') or [])} tags, "
                    f"{len(f.get('questions') or [])} questions) {f['content']}", 800)
              for f in facts),
            f"{batch['remaining']} fact(s) in {batch['bank']} lack "
            f"{'questions or tags' if args.lacking == 'either' else args.lacking}"])
    from factbank_client.cli.dispatch import follow
    from factbank_client.dispatch import DispatchError, RunStore, start

    store = RunStore()
    try:
        run = start(store, args.by, task_text(facts, args.by), Path(args.repo),
                    timeout=args.timeout)
    except DispatchError as exc:
        raise CommandError(str(exc)) from None
    if not args.json:
        print(f"run {run.id}: {args.by} enriching {len(facts)} fact(s) "
              f"(factbank dispatch show {run.id})", file=sys.stderr)
    final = follow(store, run.id, as_json=False) if not args.json else _wait(store, run.id)
    with common.client() as client:
        after = [call(client.get, f["id"], bank=batch["bank"]) for f in facts]
    done = [f["id"] for f in after if f.get("questions") and f.get("tags")]
    result = {"run": final.to_dict(), "bank": batch["bank"], "facts": [f["id"] for f in facts],
              "enriched": done, "remaining": max(0, batch["remaining"] - len(done))}
    show(args, result, lambda: [
        f"enriched {len(done)} of {len(facts)} fact(s) in {batch['bank']} "
        f"(run {final.id}, {final.status}); {result['remaining']} still lack them"])
    if final.exit_code is None:
        return 1
    return final.exit_code if 0 <= final.exit_code < 256 else 1


def _wait(store, run_id: str):
    import time

    while True:
        run = store.get(run_id)
        if run is None or run.finished:
            return run
        time.sleep(0.2)
