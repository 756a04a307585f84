"""Commands on facts: add, search, get, history, questions, confirm, dispute, supersede,
delete, categories, export, import, inject-preview, stats. Each is a thin skin over `Client`."""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from pathlib import Path

from factbank_client import config as client_config
from factbank_client import render
from factbank_client.cli import common
from factbank_client.cli.common import call, command, show
from factbank_client.client import (
    IMPORT_CHUNK_FACTS,
    is_exported_fact,
    merge_injections,
    new_fact,
    to_import_item,
)
from factbank_client.errors import FactbankError
from factbank_client.project import repo_root
from factbank_client.settings import settings
from factbank_common.commands import CommandError
from factbank_common.inert import inert_lines
from factbank_common.output import print_json, print_table
from factbank_common.schema import ORIGINS, SOURCE_KINDS


def register(sub) -> None:
    with command(
        sub, "add", cmd_add, help="save one verified fact (content, source, verbatim quote)",
        description="Save ONE atomic, durable fact with where it comes from and a verbatim "
        "quote of that source. With --source-kind file the quote is checked against the file "
        "here first. Give 2-4 --question in English AND Chinese: what a later teammate would "
        "type to find it, in everyday words, not the fact's own wording (each becomes an extra "
        "search vector; on realistic zh/en agent facts this took top-5 recall from 0.60 to "
        "0.94, cross-lingual from 0.20 to 0.92). Never store secrets: the server redacts "
        "them, but do not send them. The answer names the bank the fact went to and who can "
        "read it (in a team bank: every member).") as p:
        p.add_argument("content", help="the fact, one atomic claim")
        _fact_options(p, category_required=True)
        p.add_argument("--bank", help=common.WRITE_BANK_HELP)

    with command(sub, "search", cmd_search, help="search every configured bank",
                 description="Search every configured bank and merge the answers. "
                 "Results below the relevance gate are not hits: a query with no good match "
                 "answers nothing rather than noise. After a hit, the services also send "
                 "weaker related matches (below the gate); --related shows them, labelled.") \
            as p:
        p.add_argument("query", help="what you want to know, in your own words (any language)")
        common.add_project_option(p)
        p.add_argument("--limit", type=int, default=5,
                       help="at most this many results per bank (default 5)")
        p.add_argument("--mode", choices=["hybrid", "lexical", "dense"], default="hybrid",
                       help="hybrid: BM25 + embeddings fused (default); lexical: BM25 words "
                            "only; dense: embeddings only")
        p.add_argument("--related", action="store_true",
                       help="also show the weaker matches below the gate that came with a hit, "
                            "labelled \"(below the gate)\"")

    for name, func, text, about in (
        ("get", cmd_get, "show one fact",
         "Show one fact: its claim, status, trust, source and quote, tags and questions; for a "
         "fact that was superseded, also the fact that is current now. Reading changes "
         "nothing."),
        ("history", cmd_history, "a fact with its events and successors",
         "Show one fact, every event of its life (added, reinforced, confirmed, disputed, "
         "superseded, ...) with who and why, and the facts it replaced or that replaced it."),
    ):
        with command(sub, name, func, fact=True, help=text, description=about):
            pass  # the fact's id and --bank are all they take

    with command(
        sub, "questions", cmd_questions, fact=True,
        help="show a fact's writer questions, or add/remove some",
        description="Without options: list the fact's questions. --add appends questions "
        "(the current list is read and old + new is saved, repeats skipped); --remove drops "
        "one. At most 6 per fact, each up to 200 characters.") as p:
        p.add_argument("--add", action="append", default=[], metavar="QUESTION",
                       help="a question a teammate would ask whose answer is this fact "
                            "(repeatable; give English and Chinese ones)")
        p.add_argument("--remove", action="append", default=[], metavar="QUESTION",
                       help="drop this question (repeatable)")

    for name, func, text, about in (
        ("confirm", cmd_confirm, "the fact held when you checked it: trust rises",
         "Record that the fact still held when you checked it: its trust rises. With "
         "--quote (a fresh verbatim quote of its source) a stale fact becomes active again."),
        ("dispute", cmd_dispute, "the fact looks wrong: trust falls (supersede if you know "
                                 "the right claim)",
         "Record that the fact looks wrong, with --reason: its trust falls and it ranks lower. "
         "If you know the right claim, `factbank supersede CONTENT ID` stores it and retires "
         "this one instead."),
        ("delete", cmd_delete, "soft delete: no longer recalled, history kept",
         "Soft-delete a fact, with --reason: it is no longer recalled or injected; it and its "
         "history stay readable with `factbank history ID`."),
    ):
        with command(sub, name, func, fact=True, help=text, description=about) as p:
            # The server refuses a dispute or a delete without a reason: say so in --help.
            p.add_argument("--reason", default="", required=name in ("dispute", "delete"),
                           help="why (recorded in the fact's history)"
                           + ("; required" if name in ("dispute", "delete") else ""))
            if name == "confirm":
                p.add_argument("--quote",
                               help="a fresh verbatim quote from the fact's source: makes a "
                                    "stale fact active again (for a file: checked here)")
                p.add_argument("--source", metavar="LOCATION",
                               help="with --quote: where the quote is now (path[:line]; "
                                    "default: the fact's own file)")

    with command(
        sub, "supersede", cmd_supersede,
        usage="factbank supersede [-h] CONTENT ID [ID ...] --reason REASON --quote QUOTE "
              "[options]",
        help="replace facts that no longer hold with a new one",
        description="Store a new fact (CONTENT, as in `factbank add`) and retire the facts ID "
        "..., linked to it with the reason: factbank supersede \"The API listens on port "
        "8081\" 12 --reason \"moved in the compose change\" --quote \"port: 8081\". Give "
        "CONTENT and the ids together, before or after the options. Category, tags, "
        "questions and project default to those of the first replaced fact.") as p:
        # CONTENT first, as in `add`. `supersede ID ... --content CONTENT` (the spelling
        # before `--supersedes` took ids) still works: cmd_supersede then reads CONTENT as the first
        # id.
        p.add_argument("content", nargs="?", metavar="CONTENT",
                       help="the new claim, one atomic fact (as `factbank add CONTENT`)")
        p.add_argument("ids", nargs="*", metavar="ID",
                       help="the ids of the facts the new one replaces")
        p.add_argument("--content", dest="content_option", help=argparse.SUPPRESS)
        p.add_argument("--reason", required=True, help="why the old facts no longer hold")
        _fact_options(p, category_required=False)
        p.add_argument("--bank", help="which of your configured banks (default: the one "
                                      "holding the first replaced fact)")
        p.add_argument("--queue", action="store_true",
                       help="queue it for review instead (`factbank queue`): nothing changes "
                            "until someone accepts it (one ID only)")

    with command(sub, "categories", cmd_categories,
                 help="list categories (or `categories add NAME`)",
                 description="List each bank's categories (a fact's --category must be one "
                 "of them) with what belongs in each, whether its facts are injected at "
                 "session start and whether they lose trust with age. `factbank categories "
                 "add NAME` adds one.") as p:
        p.add_argument("--bank")
    csub = p.add_subparsers(dest="categories_command", metavar="{add}")
    with command(csub, "add", cmd_categories_add,
                 help="add a category to a bank's registry") as a:
        a.add_argument("name", help="the category's name (lowercase, digits, '-', '_')")
        a.add_argument("--description", default="",
                       help="what belongs in it (agents read this when they choose a category)")
        a.add_argument("--auto-inject", action="store_true",
                       help="inject this category's facts at session start")
        a.add_argument("--no-decay", action="store_true",
                       help="facts in it do not lose trust with age (like preferences)")
        a.add_argument("--bank")

    with command(sub, "export", cmd_export,
                 help="a bank's facts as JSONL (Fact objects)",
                 description="Write the facts of one bank (all but deleted ones) as JSONL: "
                 "one Fact object a line, with its status, trust and supersede links, to stdout "
                 "or --out (created readable by you only). `factbank import` reads it back.") \
            as p:
        p.add_argument("--bank", help="bank label (default: personal)")
        p.add_argument("--out", help="write to this file instead of stdout")

    with command(
        sub, "import", cmd_import,
        help="import a JSONL file (exported facts or NewFact lines), in chunks",
        description="Import JSONL into one bank in chunks of --chunk facts, each its own "
        "transaction (a bad line refuses its chunk and every bad line is listed; the chunks "
        "before it stay). Facts already in the bank (same content, category and project) are "
        "left as they are, not reinforced, so importing again resumes a failed import and "
        "re-importing an export changes nothing. Exported facts new to the bank come back with "
        "their status, trust and supersede links; only active ones are imported unless "
        "--all-statuses.") as p:
        p.add_argument("file", help="a .jsonl file, or - for stdin")
        p.add_argument("--bank", help="bank label to import into (default: personal)")
        p.add_argument("--all-statuses", action="store_true",
                       help="also import exported facts that are superseded, disputed or stale")
        p.add_argument("--chunk", type=int, default=IMPORT_CHUNK_FACTS,
                       help=f"facts per request and transaction (default {IMPORT_CHUNK_FACTS}, "
                            "at most 1000)")
        p.add_argument("--wait", action=argparse.BooleanOptionalAction, default=None,
                       help="after the import, show a second bar while the server fills the "
                            "facts' vectors, and return when it is done (default: when stderr "
                            "is a terminal). The facts are found by keyword search at once; "
                            "Ctrl-C stops only the waiting")
        p.add_argument("--vectors", choices=["queue", "now"], default="queue",
                       help="queue (default): commit each chunk without waiting for the "
                            "embedder, which fills the vectors after; now: embed in each "
                            "request (slower; checks near-duplicates by meaning)")

    with command(sub, "inject-preview", cmd_inject_preview,
                 help="exactly what would be injected at session start (or for --prompt)",
                 description="Print exactly the block an agent's hook would inject at session "
                 "start in this project (or, with --prompt, for that prompt), and its size in "
                 "facts and tokens, changing nothing: handoffs it names stay open for the real "
                 "session, conflicts stay untold, facts stay unseen. It uses a fresh session id "
                 "unless --session-id.") as p:
        p.add_argument("--prompt", help="preview the injection for this prompt")
        common.add_project_option(p)
        p.add_argument("--session-id", help="default: a fresh one, so nothing counts as seen")

    with command(sub, "stats", cmd_stats, help="counts per bank, or repeats (--misses)",
                 description="For each configured bank: its name, kind and version, its "
                 "facts by status, the size of its keyword index, and the facts still waiting "
                 "for their vectors after an import (vectors_pending). With --misses: "
                 "the repeats instead (writes whose claim the bank already held), per week, "
                 "project and kind, split into recall misses (never shown to the writing "
                 "session), presentation misses (shown, repeated anyway) and repeated "
                 "corrections, with the facts involved; --around compares the --weeks before "
                 "a date with the weeks after it (docs/misses.md).") as p:
        p.add_argument("--misses", action="store_true",
                       help="repeats per week, project and kind instead of the counts")
        p.add_argument("--weeks", type=int, default=4, metavar="N",
                       help="with --misses: the last N weeks (default 4); with --around: N "
                       "weeks on each side")
        p.add_argument("--since", help="with --misses: from this date "
                       "(YYYY-MM-DD) instead of --weeks back")
        p.add_argument("--around", metavar="DATE", help="with --misses: the totals of the "
                       "--weeks before DATE (YYYY-MM-DD) against the weeks from it")


def _fact_options(p, *, category_required: bool) -> None:
    p.add_argument("--category", required=category_required,
                   help="e.g. preferences, environment, project, decisions, gotchas, people, "
                        "reference (see `factbank categories`)")
    p.add_argument("--source-kind", choices=SOURCE_KINDS,
                   help="file, url, commit, command, user, doc or fact (default: url for "
                        "http(s), file for an existing path, user without --source)")
    p.add_argument("--source", default="", metavar="LOCATION",
                   help="path[:line], path::Class.method (a symbol in Python, JS/TS, Go or "
                        "Rust: the fact follows it), URL, commit SHA, command, or doc reference")
    p.add_argument("--quote", required=category_required,
                   help="verbatim text from the source (for a file: checked here)")
    p.add_argument("--origin", choices=ORIGINS,
                   help="user said it / verified with a tool / inferred (server default)")
    p.add_argument("--tentative", action="store_true", help="not sure yet: lower trust")
    p.add_argument("--tag", action="append", dest="tags", metavar="TAG",
                   help="topic, systems, aliases; in Chinese and English (repeatable)")
    p.add_argument("--question", action="append", dest="questions", metavar="QUESTION",
                   help="a question a later teammate would type whose answer is this fact, in "
                        "everyday words (repeatable; give 2-4, in English AND Chinese)")
    common.add_project_option(p)
    p.add_argument("--global", dest="no_project", action="store_true",
                   help="not tied to a project (e.g. a personal preference)")


# --- shared helpers ------------------------------------------------------------------------


def _source_kind(args) -> str:
    if args.source_kind:
        return args.source_kind
    if not args.source:
        return "user"
    if args.source.startswith(("http://", "https://")):
        return "url"
    path = args.source.split(":")[0]
    if Path(path).expanduser().is_file():
        return "file"
    if "/" in path or "\\" in path or re.search(r"\.[A-Za-z0-9]{1,8}$", path):
        raise CommandError(
            f"no such file: {path} (looked in {Path.cwd()}); give the file's path from here "
            "(with :LINE), or --source-kind url|commit|command|user|doc if it is not a file")
    raise CommandError("--source-kind is needed for this source "
                       f"({', '.join(SOURCE_KINDS)})")


def _build_fact(args, content: str, *, defaults: dict | None = None) -> dict:
    defaults = defaults or {}
    kind = _source_kind(args)
    if not args.quote:
        raise CommandError("--quote is required: a verbatim quote from the source")
    project = common.project(args) if (args.project or args.no_project or not defaults) \
        else defaults.get("project")
    try:
        fact = new_fact(content, args.category or defaults.get("category"), kind, args.source,
                        args.quote, tags=args.tags or defaults.get("tags") or [],
                        questions=args.questions or defaults.get("questions"),
                        origin=args.origin, tentative=True if args.tentative else None,
                        project=project)
    except FactbankError as exc:
        raise CommandError(f"refused: {exc}") from None
    if not fact["category"]:
        raise CommandError("--category is required")
    return fact


# --- commands ------------------------------------------------------------------------------


def cmd_add(args) -> int:
    fact = _build_fact(args, args.content)
    with common.client() as client:
        outcome = call(client.add, fact, bank=args.bank)
    return show(args, outcome, lambda: render.outcome_lines(outcome))


def cmd_search(args) -> int:
    with common.client() as client:
        data = call(client.search, args.query, project=common.project(args), limit=args.limit,
                    mode=args.mode)
    if not args.related:  # below the gate: not hits (the help says so), unless asked for
        data = {**data, "results": [r for r in data["results"] if not r.get("companion")]}
    if args.json:
        print_json(data)
        return 0
    common.bank_notes(data.get("degraded"), ": degraded")
    if not data["results"]:
        print("no facts above the recall floor")
        return 0
    print_table(*render.hit_rows(data["results"]))
    return 0


def cmd_get(args) -> int:
    with common.client() as client:
        data = call(client.history, args.id, bank=args.bank)
    now = render.current(data)
    return show(args, {**data["fact"], "bank_label": data["bank"]}, lambda: [
        *render.fact_lines(data["fact"], data["bank"]),
        *([f"  current:  #{now['id']} {now['content']}"] if now else [])])


def cmd_history(args) -> int:
    with common.client() as client:
        data = call(client.history, args.id, bank=args.bank)
    if args.json:
        print_json(data)
        return 0
    print("\n".join([*render.fact_lines(data["fact"], data["bank"]), ""]))
    print_table(render.event_rows(data["events"]), render.EVENT_COLUMNS)
    for line in render.links_lines(data):
        print(line)
    return 0


def cmd_questions(args) -> int:
    changed = bool(args.add or args.remove)
    with common.client() as client:
        if changed:
            fact = call(client.add_questions, args.id, args.add, remove=args.remove,
                        bank=args.bank)
        else:
            fact = call(client.get, args.id, bank=args.bank)
    return show(args, fact, lambda: render.questions_lines(fact, changed=changed))


def _judge(args, method: str, verb: str, **kw) -> int:
    with common.client() as client:
        fact = call(getattr(client, method), args.id, args.reason, bank=args.bank, **kw)
    return show(args, fact, lambda: [render.judged_line(verb, fact)])


def cmd_confirm(args) -> int:
    # The project and its remotes go on the confirm event: the rule gate counts a claim
    # confirmed in two unrelated projects (docs/staleness.md).
    from factbank_client.project import confirm_evidence

    evidence = confirm_evidence(Path.cwd())
    if args.quote:
        evidence.update(_fresh_quote(args))
    elif args.source:
        raise CommandError("--source goes with --quote (the fresh quote found there)")
    return _judge(args, "confirm", "confirmed", evidence=evidence or None)


def _fresh_quote(args) -> dict:
    """A confirm's fresh evidence: the quote, and for a file source where it is now and its
    fingerprint, checked against the file here like `add` checks it."""
    from factbank_client.client import check_file_quote
    from factbank_client.errors import QuoteNotFound
    from factbank_client.staleness import fingerprint

    with common.client() as client:
        fact = call(client.get, args.id, bank=args.bank)
    src = fact.get("source") or {}
    if src.get("kind") != "file":
        if args.source:
            raise CommandError(f"--source: fact #{args.id}'s source is {src.get('kind')}, "
                               "not a file")
        return {"quote": args.quote}
    location = args.source or re.sub(r":\d+(-\d+)?$", "", src.get("location") or "")
    cwd = Path.cwd()
    root = repo_root(cwd)
    if not args.source and root is not None:  # the bank's location, not one typed here
        from factbank_client.staleness.verify import Repo
        from factbank_common.schema import split_symbol

        if Repo(root).ignored_path((split_symbol(location) or (location,))[0]):
            raise CommandError(f"refused: {location} is ignored by git here (this machine's "
                               "own file); pass --source to cite it yourself")
    try:
        check = check_file_quote(location, args.quote, cwd=root or cwd, root=root)
    except QuoteNotFound as exc:
        raise CommandError(f"refused: {exc}") from None
    had_line = re.search(r":\d+(-\d+)?$", src.get("location") or "")
    if not args.source and had_line and check.spans:  # the line it is on now
        check.location += f":{check.spans[0][0]}"
    out: dict = {"quote": args.quote, "location": check.location}
    fp = fingerprint.for_file(check, root)
    if fp:
        out["fingerprint"] = fp
    return out


def cmd_dispute(args) -> int:
    return _judge(args, "dispute", "disputed")


def cmd_delete(args) -> int:
    return _judge(args, "delete", "deleted")


def _supersede_args(args) -> tuple[str, list[int]]:
    """CONTENT and the ids from `supersede CONTENT ID ...` or the older `supersede ID ...
    --content CONTENT` (then the first positional is an id)."""
    words = [w for w in (args.content, *args.ids) if w is not None]
    if args.content_option is not None:
        content = args.content_option
    else:
        content, words = (words[0], words[1:]) if words else ("", [])
    if not content.strip():
        raise CommandError("give the new claim: factbank supersede CONTENT ID [ID ...] "
                           "--reason REASON --quote QUOTE")
    if not words:
        raise CommandError("give the ids of the facts it replaces: factbank supersede CONTENT "
                           "ID [ID ...]")
    bad = [w for w in words if not w.isdigit()]
    if bad:
        raise CommandError(f"ID: {bad[0]!r} is not a fact id (CONTENT comes once, before the "
                           "ids; quote it if it has spaces)")
    return content, [int(w) for w in words]


def cmd_supersede(args) -> int:
    content, args.ids = _supersede_args(args)
    with common.client() as client:
        old = call(client.get, args.ids[0], bank=args.bank)
        fact = _build_fact(args, content, defaults=old)
        if args.queue:
            if len(args.ids) != 1:
                raise CommandError("--queue takes one ID: a candidate supersedes one fact")
            cand = call(client.queue_add, fact, replaces=args.ids[0], reason=args.reason,
                        bank=args.bank or old["bank_label"])
            return show(args, cand, lambda: [
                f"queued candidate {cand['id']} (supersedes #{args.ids[0]} once accepted: "
                f"factbank queue accept {cand['id']})"])
        outcome = call(client.supersede, fact, args.ids, args.reason,
                       bank=args.bank or old["bank_label"])
    return show(args, outcome, lambda: [
        *render.outcome_lines(outcome, note=False),
        f"  supersedes {render.id_list(args.ids)}: {args.reason}"])


def cmd_categories(args) -> int:
    with common.client() as client:
        data = call(client.categories, banks=[args.bank] if args.bank else None)
    if args.json:
        print_json(data)
        return 0
    print_table(render.category_rows(data), render.CATEGORY_COLUMNS)
    print(render.CATEGORY_NOTE)
    return 0


def cmd_categories_add(args) -> int:
    with common.client() as client:
        data = call(client.add_category, args.name, args.description,
                    auto_inject=args.auto_inject, decays=not args.no_decay, bank=args.bank)
    return show(args, data, lambda: [f"added category {data['name']!r} to {data['bank']}"])


def cmd_export(args) -> int:
    """JSONL, one fact a line. With --json: to stdout one JSON array of the same facts; with
    --out too, the facts go to the file and stdout gets {"exported": n, "path": ...}."""
    n = 0
    facts: list = []
    as_json = getattr(args, "json", False)
    with common.client() as client:
        # Created 0600 from the start: an export holds every fact of the bank.
        out = client_config.open_private(args.out) if args.out else sys.stdout
        try:
            for line in client.export(bank=args.bank):
                if as_json and not args.out:
                    facts.append(json.loads(line))
                else:
                    out.write(line + "\n")
                n += 1
        except FactbankError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if args.out:
                out.close()
    if as_json:
        print_json({"exported": n, "path": args.out} if args.out else facts)
    elif args.out:
        print(f"exported {n} facts to {args.out}", file=sys.stderr)
    return 0


def _read_import(args) -> tuple[list[dict], int]:
    """The file's lines as import items (NewFact, plus `restore` for exported facts), and how
    many exported non-active facts were skipped."""
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text("utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    items: list[dict] = []
    skipped = 0
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{args.file}:{n}: malformed JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise CommandError(f"{args.file}:{n}: a line must be a JSON object")
        if is_exported_fact(obj):
            if obj.get("status") != "active" and not args.all_statuses:
                skipped += 1
                continue
            obj = to_import_item(obj)
        items.append(obj)
    return items, skipped


def cmd_import(args) -> int:
    from tqdm import tqdm

    if not 1 <= args.chunk <= 1000:
        raise CommandError("--chunk must be 1 to 1000 (the server takes 1000 lines an import)")
    items, skipped = _read_import(args)
    if not items:
        raise CommandError(f"nothing to import in {args.file}"
                           + (f" ({skipped} non-active facts skipped)" if skipped else ""))
    totals = {"stored": 0, "reinforced": 0, "present": 0}
    results: list[dict] = []
    bank = args.bank or "?"
    visible = None
    # The bar moves when the server has committed a chunk: it tracks the server's work.
    with common.client() as client, tqdm(total=len(items), unit="fact", desc="import",
                                   file=sys.stderr, disable=None) as bar:
        try:
            for data in client.import_items(items, bank=args.bank, chunk=args.chunk,
                                            vectors=args.vectors):
                for k in totals:
                    totals[k] += data[k]
                results.extend(data["results"])
                bank, visible = data["bank"], data.get("visible_to")
                bar.update(data["done"] - bar.n)
        except FactbankError as exc:
            done = getattr(exc, "done", 0)
            kept = (f"; the first {done} facts are imported (each chunk is its own transaction):"
                    " run the same command again to resume, facts already imported are skipped"
                    if done else "; nothing was imported")
            raise CommandError(f"import refused: {exc}{kept}") from None
    wait = sys.stderr.isatty() if args.wait is None else args.wait
    found = None
    if totals["stored"]:
        from factbank_client.cli.enrich import backlog

        with common.client() as client:
            if wait and args.vectors == "queue":
                _wait_for_vectors(client, bank)
            found = backlog(client, bank)
    if args.json:
        print_json({**totals, "skipped": skipped, "bank": bank, "visible_to": visible,
                    "lacking_questions": found["lacking_questions"] if found else None,
                    "results": results})
        return 0
    from factbank_client.cli.enrich import backlog_lines

    into = render.audience({"bank": bank, "visible_to": visible})
    print(f"imported {len(items)} facts into {into}: {totals['stored']} stored, "
          f"{totals['reinforced']} reinforced, {totals['present']} already present"
          + (f"; skipped {skipped} non-active (use --all-statuses)" if skipped else ""))
    for line in backlog_lines(found):
        print(line)
    return 0


def _wait_for_vectors(client, bank: str) -> None:
    """The second bar: the server's own count of facts still waiting for vectors, polled
    until it reaches 0 (its total is the most seen pending, so it only moves forward)."""
    from tqdm import tqdm

    with tqdm(total=0, unit="fact", desc="vectors", file=sys.stderr, disable=None) as bar:
        try:
            for pending in client.wait_for_vectors(bank):
                if pending > bar.total - bar.n:
                    bar.total = bar.n + pending
                bar.update(bar.total - pending - bar.n)
                bar.refresh()
        except KeyboardInterrupt:
            print("stopped waiting; the server keeps filling the vectors "
                  "(`factbank stats` shows vectors_pending)", file=sys.stderr)
        except FactbankError as exc:
            print(f"warning: {exc}", file=sys.stderr)


def cmd_inject_preview(args) -> int:
    session = args.session_id or f"preview-{uuid.uuid4()}"
    kind = "prompt" if args.prompt is not None else "session"
    with common.client() as client:
        data = call(client.inject, kind, session, project=common.project(args),
                    prompt=args.prompt, preview=True)
    root = repo_root(Path.cwd())
    if root is not None and settings.inject_check:
        # As the hooks print it: checked against this working tree first (worktree.py).
        from factbank_client.staleness.worktree import check_answers

        if check_answers(data["banks"], root):
            data = {**merge_injections(list(data["banks"].items())),
                    **({"errors": data["errors"]} if data.get("errors") else {})}
    if args.json:
        print_json(data)
        return 0
    common.bank_notes(data.get("errors"), " skipped")
    if not data["text"]:
        print(f"(nothing would be injected: no facts above the floor; {kind})", file=sys.stderr)
        return 0
    print(inert_lines(data["text"]))  # as the hooks print it (hookmain.context_output)
    print(f"\n({kind}: {len(data['facts'])} facts, {data['tokens']} tokens)", file=sys.stderr)
    return 0


def cmd_stats(args) -> int:
    if args.misses:
        return cmd_stats_misses(args)
    if args.since or args.around:
        raise CommandError("--since and --around go with --misses")
    with common.client() as client:
        data = call(client.stats)
    return show(args, data, lambda: [line for bank, stats in data.items()
                                     for line in (f"{bank}:", *render.nested_lines(stats, "  "))])


def cmd_stats_misses(args) -> int:
    from datetime import date

    for name in ("since", "around"):
        value = getattr(args, name)
        if value is not None:
            try:
                date.fromisoformat(value)
            except ValueError:
                raise CommandError(f"--{name}: {value!r} is not a date (YYYY-MM-DD)") from None
    if not 1 <= args.weeks <= 104:
        raise CommandError(f"--weeks: {args.weeks} is out of range (1-104)")
    with common.client() as client:
        data = call(lambda: client.misses(weeks=args.weeks, since=args.since,
                                          around=args.around))
    return show(args, data, lambda: [line for bank, report in data.items()
                                     for line in render.miss_lines(bank, report)])

