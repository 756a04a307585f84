"""Commands on facts: add, search, get, history, questions, confirm, dispute, supersede,
delete, categories, export, import, inject-preview, stats. Each is a thin skin over `Client`."""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from factbank_client import config as client_config
from factbank_client.cli.main import CommandError
from factbank_client.cli.output import add_json_flag, print_json, print_table
from factbank_client.client import (
    IMPORT_CHUNK_FACTS,
    Client,
    FactbankError,
    check_file_quote,
    is_exported_fact,
    matched_question,
    to_import_item,
)
from factbank_client.project import project_key, repo_root
from factbank_client.schema import ORIGINS, SOURCE_KINDS


def register(sub) -> None:
    p = sub.add_parser(
        "add", help="save one verified fact (content, source, verbatim quote)",
        description="Save ONE atomic, durable fact with where it comes from and a verbatim "
        "quote of that source. With --source-kind file the quote is checked against the file "
        "here first. Give 2-4 --question in English AND Chinese: what a later teammate would "
        "type to find it, in everyday words, not the fact's own wording (each becomes an extra "
        "search vector; on realistic zh/en agent facts this took top-5 recall from 0.60 to "
        "0.94, cross-lingual from 0.20 to 0.92). Never store secrets: the server redacts "
        "them, but do not send them.")
    p.add_argument("content", help="the fact, one atomic claim")
    _fact_options(p, category_required=True)
    p.add_argument("--bank", help="bank label (default: personal, or team for team categories)")
    add_json_flag(p)
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("search", help="search every configured bank",
                       description="Search every configured bank and merge the answers. "
                       "Results below the relevance gate are not returned as hits; a query "
                       "with no good match answers nothing rather than noise.")
    p.add_argument("query", help="what you want to know, in your own words (any language)")
    p.add_argument("--project", help="project key (default: this repository's)")
    p.add_argument("--limit", type=int, default=5,
                   help="at most this many results per bank (default 5)")
    p.add_argument("--mode", choices=["hybrid", "lexical", "dense"], default="hybrid",
                   help="hybrid: BM25 + embeddings fused (default); lexical: BM25 words only; "
                        "dense: embeddings only")
    add_json_flag(p)
    p.set_defaults(func=cmd_search)

    for name, func, text in (("get", cmd_get, "show one fact"),
                             ("history", cmd_history, "a fact with its events and successors")):
        p = sub.add_parser(name, help=text)
        p.add_argument("id", type=int)
        p.add_argument("--bank")
        add_json_flag(p)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "questions", help="show a fact's writer questions, or add/remove some",
        description="Without options: list the fact's questions. --add appends questions "
        "(the current list is read and old + new is saved, repeats skipped); --remove drops "
        "one. At most 6 per fact, each up to 200 characters.")
    p.add_argument("id", type=int)
    p.add_argument("--add", action="append", default=[], metavar="QUESTION",
                   help="a question a teammate would ask whose answer is this fact "
                        "(repeatable; give English and Chinese ones)")
    p.add_argument("--remove", action="append", default=[], metavar="QUESTION",
                   help="drop this question (repeatable)")
    p.add_argument("--bank")
    add_json_flag(p)
    p.set_defaults(func=cmd_questions)

    for name, func, text in (
        ("confirm", cmd_confirm, "the fact held when you checked it: trust rises"),
        ("dispute", cmd_dispute, "the fact looks wrong: trust falls (supersede if you know "
                                 "the right claim)"),
        ("delete", cmd_delete, "soft delete: no longer recalled, history kept"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("id", type=int)
        # The server refuses a dispute or a delete without a reason: say so in --help.
        p.add_argument("--reason", default="", required=name in ("dispute", "delete"),
                       help="why (recorded in the fact's history)"
                       + ("; required" if name in ("dispute", "delete") else ""))
        p.add_argument("--bank")
        add_json_flag(p)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "supersede", help="replace facts that no longer hold with a new one",
        description="Store a new fact and retire the given ones, linked to it with the reason. "
        "Category, tags, questions and project default to those of the first replaced fact.")
    p.add_argument("ids", type=int, nargs="+", metavar="ID",
                   help="the ids of the facts the new one replaces")
    p.add_argument("--reason", required=True, help="why the old facts no longer hold")
    p.add_argument("--content", required=True, help="the new claim")
    _fact_options(p, category_required=False)
    p.add_argument("--bank")
    add_json_flag(p)
    p.set_defaults(func=cmd_supersede)

    p = sub.add_parser("categories", help="list categories (or `categories add NAME`)")
    p.add_argument("--bank")
    add_json_flag(p)
    p.set_defaults(func=cmd_categories)
    csub = p.add_subparsers(dest="categories_command", metavar="{add}")
    a = csub.add_parser("add", help="add a category to a bank's registry")
    a.add_argument("name", help="the category's name (lowercase, digits, '-', '_')")
    a.add_argument("--description", default="",
                   help="what belongs in it (agents read this when they choose a category)")
    a.add_argument("--auto-inject", action="store_true",
                   help="inject this category's facts at session start")
    a.add_argument("--no-decay", action="store_true",
                   help="facts in it do not lose trust with age (like preferences)")
    a.add_argument("--bank")
    add_json_flag(a)
    a.set_defaults(func=cmd_categories_add)

    p = sub.add_parser("export", help="a bank's facts as JSONL (Fact objects)")
    p.add_argument("--bank", help="bank label (default: personal)")
    p.add_argument("--out", help="write to this file instead of stdout")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import", help="import a JSONL file (exported facts or NewFact lines), in chunks",
        description="Import JSONL into one bank in chunks of --chunk facts, each its own "
        "transaction (a bad line refuses its chunk and every bad line is listed; the chunks "
        "before it stay). Facts already in the bank (same content, category and project) are "
        "left as they are, not reinforced, so importing again resumes a failed import and "
        "re-importing an export changes nothing. Exported facts new to the bank come back with "
        "their status, trust and supersede links; only active ones are imported unless "
        "--all-statuses.")
    p.add_argument("file", help="a .jsonl file, or - for stdin")
    p.add_argument("--bank", help="bank label to import into (default: personal)")
    p.add_argument("--all-statuses", action="store_true",
                   help="also import exported facts that are superseded, disputed or stale")
    p.add_argument("--chunk", type=int, default=IMPORT_CHUNK_FACTS,
                   help=f"facts per request and transaction (default {IMPORT_CHUNK_FACTS}, "
                        "at most 1000)")
    add_json_flag(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("inject-preview",
                       help="exactly what would be injected at session start (or for --prompt)")
    p.add_argument("--prompt", help="preview the injection for this prompt")
    p.add_argument("--project", help="project key (default: this repository's)")
    p.add_argument("--session-id", help="default: a fresh one, so nothing counts as seen")
    add_json_flag(p)
    p.set_defaults(func=cmd_inject_preview)

    p = sub.add_parser("stats", help="counts per bank")
    add_json_flag(p)
    p.set_defaults(func=cmd_stats)


def _fact_options(p, *, category_required: bool) -> None:
    p.add_argument("--category", required=category_required,
                   help="e.g. preferences, environment, project, decisions, gotchas, people, "
                        "reference (see `factbank categories`)")
    p.add_argument("--source-kind", choices=SOURCE_KINDS,
                   help="default: url for http(s), file for an existing path, user without "
                        "--source")
    p.add_argument("--source", default="", metavar="LOCATION",
                   help="path[:line], URL, commit SHA, command, or doc reference")
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
    p.add_argument("--project", help="project key (default: this repository's)")
    p.add_argument("--global", dest="no_project", action="store_true",
                   help="not tied to a project (e.g. a personal preference)")


# --- shared helpers ------------------------------------------------------------------------


def _client() -> Client:
    return Client(client_config.load())


def _run(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except FactbankError as exc:
        raise CommandError(str(exc)) from None


def _project(args) -> str | None:
    if getattr(args, "no_project", False):
        return None
    return args.project or project_key(Path.cwd())


def _when(value: Any) -> str:
    return str(value or "-")[:16].replace("T", " ")


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
    location = args.source
    if not args.quote:
        raise CommandError("--quote is required: a verbatim quote from the source")
    if kind == "file":
        cwd = Path.cwd()
        try:
            location = check_file_quote(args.source, args.quote, cwd=cwd,
                                        root=repo_root(cwd)).location
        except FactbankError as exc:
            raise CommandError(f"refused: {exc}") from None
    fact: dict[str, Any] = {
        "content": content,
        "category": args.category or defaults.get("category"),
        "source": {"kind": kind, "location": location},
        "quote": args.quote,
        "tags": args.tags or defaults.get("tags") or [],
    }
    questions = args.questions or defaults.get("questions")
    if questions:
        fact["questions"] = questions
    if not fact["category"]:
        raise CommandError("--category is required")
    if args.origin:
        fact["origin"] = args.origin
    if args.tentative:
        fact["tentative"] = True
    project = _project(args) if (args.project or args.no_project or not defaults) \
        else defaults.get("project")
    if project:
        fact["project"] = project
    return fact


def _print_outcome(outcome: dict, *, note: bool = True) -> None:
    fact = outcome["fact"]
    print(f"{outcome['status']} fact {fact['id']} in {outcome['bank']} "
          f"(trust {fact['trust']:.2f})")
    for item in outcome.get("redacted") or []:
        print(f"  redacted: {item.get('kind', item)} in {item.get('field', '?')}")
    if note and outcome.get("note"):
        print(f"  note: {outcome['note']}")
    if outcome.get("possible_duplicate_of"):
        ids = " ".join(str(i) for i in [*outcome["possible_duplicate_of"], fact["id"]])
        print(f"  if it does: factbank supersede {ids} --reason WHY --content ... "
              "(retires them all, keeps one current copy)")


def _print_fact(fact: dict, bank: str | None = None) -> None:
    trust = f"trust {fact['trust']:.2f} (effective {fact['effective_trust']:.2f})"
    tentative = " tentative" if fact.get("tentative") else ""
    print(f"#{fact['id']}  {fact['status']}{tentative}  {trust}  {bank or fact['bank']}")
    print(f"  {fact['content']}")
    source = fact["source"]
    print(f"  source:   {source['kind']} {source.get('location') or ''}".rstrip())
    print(f"  quote:    {fact['quote']!r}")
    print(f"  category: {fact['category']}   tags: {', '.join(fact['tags']) or '-'}")
    questions = fact.get("questions") or []
    print(f"  questions: {' | '.join(questions) if questions else '-'}")
    print(f"  project:  {fact.get('project') or '-'}")
    by = fact.get("created_by") or {}
    print(f"  origin:   {fact['origin']}, by {by.get('member', '?')}/{by.get('agent') or '-'} "
          f"at {_when(fact['created_at'])}, confirmed {_when(fact['confirmed_at'])}")
    if fact.get("superseded_by"):
        print(f"  superseded by #{fact['superseded_by']}: {fact.get('supersede_reason') or ''}")


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# --- commands ------------------------------------------------------------------------------


def cmd_add(args) -> int:
    fact = _build_fact(args, args.content)
    with _client() as client:
        outcome = _run(client.add, fact, bank=args.bank)
    if args.json:
        print_json(outcome)
    else:
        _print_outcome(outcome)
    return 0


def cmd_search(args) -> int:
    project = args.project or project_key(Path.cwd())
    with _client() as client:
        data = _run(client.search, args.query, project=project, limit=args.limit, mode=args.mode)
    if args.json:
        print_json(data)
        return 0
    for bank, why in (data.get("degraded") or {}).items():
        print(f"factbank: {bank}: degraded: {why}", file=sys.stderr)
    if not data["results"]:
        print("no facts above the recall floor")
        return 0
    rows = []
    for r in data["results"]:
        f = r["fact"]
        via = r.get("via")
        note = f" (via #{via['superseded']}: {via.get('reason') or ''})" if via else ""
        note += " (below the gate)" if r.get("companion") else ""
        question = matched_question(r)
        rows.append({"id": f["id"], "bank": r["bank"], "score": f"{r['score']:.3f}",
                     "trust": f"{f['effective_trust']:.2f}", "category": f["category"],
                     "content": _short(f["content"]) + note,
                     "matched question": _short(question, 50) if question else None})
    columns = ["id", "bank", "score", "trust", "category", "content"]
    if any(row["matched question"] for row in rows):
        columns.append("matched question")
    print_table(rows, columns)
    return 0


def cmd_get(args) -> int:
    with _client() as client:
        data = _run(client.history, args.id, bank=args.bank)
    if args.json:
        print_json({**data["fact"], "bank_label": data["bank"]})
        return 0
    _print_fact(data["fact"], data["bank"])
    current = data.get("current")
    if current and current["id"] != data["fact"]["id"]:
        print(f"  current:  #{current['id']} {current['content']}")
    return 0


def cmd_history(args) -> int:
    with _client() as client:
        data = _run(client.history, args.id, bank=args.bank)
    if args.json:
        print_json(data)
        return 0
    _print_fact(data["fact"], data["bank"])
    print()
    rows = [{"at": _when(e["created_at"]), "event": e["kind"],
             "trust": f"{e['trust_before'] if e['trust_before'] is not None else '-'}"
                      f" -> {e['trust_after'] if e['trust_after'] is not None else '-'}",
             "by": f"{e.get('member') or '?'}/{e.get('agent') or '-'}",
             "related": e.get("related_fact"), "reason": e.get("reason") or ""}
            for e in data["events"]]
    print_table(rows, ["at", "event", "trust", "by", "related", "reason"])
    for old in data.get("supersedes") or []:
        print(f"supersedes #{old['id']}: {_short(old['content'])} "
              f"({old.get('supersede_reason') or ''})")
    for new in data.get("successors") or []:
        print(f"superseded by #{new['id']}: {_short(new['content'])}")
    return 0


def cmd_questions(args) -> int:
    with _client() as client:
        if args.add or args.remove:
            fact = _run(client.add_questions, args.id, args.add, remove=args.remove,
                        bank=args.bank)
        else:
            fact = _run(client.get, args.id, bank=args.bank)
    if args.json:
        print_json(fact)
        return 0
    questions = fact.get("questions") or []
    verb = "now has" if args.add or args.remove else "has"
    print(f"fact {fact['id']} in {fact['bank_label']} {verb} {len(questions)} question"
          f"{'' if len(questions) == 1 else 's'}")
    for q in questions:
        print(f"  {q}")
    if not questions:
        print("  add 2-4, in English and Chinese: factbank questions "
              f"{fact['id']} --add '...' --add '...'")
    return 0


def _judge(args, method: str, verb: str) -> int:
    with _client() as client:
        fact = _run(getattr(client, method), args.id, args.reason, bank=args.bank)
    if args.json:
        print_json(fact)
    else:
        print(f"{verb} fact {fact['id']} in {fact['bank_label']}: status {fact['status']}, "
              f"trust {fact['trust']:.2f}")
    return 0


def cmd_confirm(args) -> int:
    return _judge(args, "confirm", "confirmed")


def cmd_dispute(args) -> int:
    return _judge(args, "dispute", "disputed")


def cmd_delete(args) -> int:
    return _judge(args, "delete", "deleted")


def cmd_supersede(args) -> int:
    with _client() as client:
        old = _run(client.get, args.ids[0], bank=args.bank)
        fact = _build_fact(args, args.content, defaults=old)
        outcome = _run(client.supersede, fact, args.ids, args.reason,
                       bank=args.bank or old["bank_label"])
    if args.json:
        print_json(outcome)
        return 0
    _print_outcome(outcome, note=False)
    print(f"  supersedes {', '.join(f'#{i}' for i in args.ids)}: {args.reason}")
    return 0


def cmd_categories(args) -> int:
    with _client() as client:
        data = _run(client.categories, banks=[args.bank] if args.bank else None)
    if args.json:
        print_json(data)
        return 0
    rows = [{"bank": bank, **c} for bank, cats in data.items() for c in cats]
    for r in rows:
        # What session start really injects: every fact of an auto-inject category, and of
        # any other category the facts of the current project (inject.session_block).
        r["auto_inject"] = "all" if r.get("auto_inject") else "project"
        r["decays"] = "yes" if r.get("decays") else "no"
    print_table(rows, ["bank", "name", "facts", "auto_inject", "decays", "description"])
    print("\nauto_inject: what session start injects from the category: all its facts, or "
          "only the current project's.")
    return 0


def cmd_categories_add(args) -> int:
    with _client() as client:
        data = _run(client.add_category, args.name, args.description,
                    auto_inject=args.auto_inject, decays=not args.no_decay, bank=args.bank)
    if args.json:
        print_json(data)
    else:
        print(f"added category {data['name']!r} to {data['bank']}")
    return 0


def cmd_export(args) -> int:
    n = 0
    with _client() as client:
        # Created 0600 from the start: an export holds every fact of the bank.
        out = client_config.open_private(args.out) if args.out else sys.stdout
        try:
            for line in client.export(bank=args.bank):
                out.write(line + "\n")
                n += 1
        except FactbankError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if args.out:
                out.close()
    if args.out:
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
    # The bar moves when the server has committed a chunk: it tracks the server's work.
    with _client() as client, tqdm(total=len(items), unit="fact", desc="import",
                                   file=sys.stderr, disable=None) as bar:
        try:
            for data in client.import_items(items, bank=args.bank, chunk=args.chunk):
                for k in totals:
                    totals[k] += data[k]
                results.extend(data["results"])
                bank = data["bank"]
                bar.update(data["done"] - bar.n)
        except FactbankError as exc:
            done = getattr(exc, "done", 0)
            kept = (f"; the first {done} facts are imported (each chunk is its own transaction):"
                    " run the same command again to resume, facts already imported are skipped"
                    if done else "; nothing was imported")
            raise CommandError(f"import refused: {exc}{kept}") from None
    if args.json:
        print_json({**totals, "skipped": skipped, "bank": bank, "results": results})
        return 0
    print(f"imported {len(items)} facts into {bank}: {totals['stored']} stored, "
          f"{totals['reinforced']} reinforced, {totals['present']} already present"
          + (f"; skipped {skipped} non-active (use --all-statuses)" if skipped else ""))
    return 0


def cmd_inject_preview(args) -> int:
    project = args.project or project_key(Path.cwd())
    session = args.session_id or f"preview-{uuid.uuid4()}"
    kind = "prompt" if args.prompt is not None else "session"
    with _client() as client:
        data = _run(client.inject, kind, session, project=project, prompt=args.prompt)
    if args.json:
        print_json(data)
        return 0
    for bank, why in (data.get("errors") or {}).items():
        print(f"factbank: {bank} skipped: {why}", file=sys.stderr)
    if not data["text"]:
        print(f"(nothing would be injected: no facts above the floor; {kind})", file=sys.stderr)
        return 0
    print(data["text"])
    print(f"\n({kind}: {len(data['facts'])} facts, {data['tokens']} tokens)", file=sys.stderr)
    return 0


def cmd_stats(args) -> int:
    with _client() as client:
        data = _run(client.stats)
    if args.json:
        print_json(data)
        return 0
    for bank, stats in data.items():
        print(f"{bank}:")
        _print_nested(stats, "  ")
    return 0


def _print_nested(data: Any, indent: str) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict | list):
                print(f"{indent}{key}:")
                _print_nested(value, indent + "  ")
            else:
                print(f"{indent}{key}: {'-' if value is None else value}")
    elif isinstance(data, list):
        for item in data:
            if isinstance(item, dict):
                print(f"{indent}- " + ", ".join(f"{k}={v}" for k, v in item.items()))
            else:
                print(f"{indent}- {item}")
    else:
        print(f"{indent}{data}")
