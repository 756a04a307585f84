"""`factbank eval ...` and `factbank bench`: measurements against a real, throwaway stack.

Registered through the `factbank.commands` entry points. They need the server extra (they
start Postgres and both services themselves; in a light client install this module's import
raises MissingExtra and `factbank` leaves them out), and read eval data from wherever it is
(e.g. ../shared/evaldata); nothing is copied into the project. The eval modules are imported
when a command runs, not when `factbank` builds its parser (numpy, httpx).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from factbank_common.commands import CommandError, require
from factbank_common.output import add_json_flag

require("server", "asyncpg", "litestar", "uvicorn", "numpy")


def register(sub) -> None:
    ev = sub.add_parser("eval", help="retrieval evals against a throwaway stack",
                        description="Retrieval evals, each through HTTP against its own "
                        "services and a throwaway bank (Postgres from DATABASE_URL, else a "
                        "throwaway embedded one): beir (a BEIR-layout set), "
                        "agent-memory (our zh/en set against the grep control), staleness "
                        "(verify over a scripted git history), all (the go/no-go report). "
                        "docs/evals.md describes each.")
    kinds = ev.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = kinds.add_parser("beir", help="R@5, MRR@10, nDCG@10, latency on a BEIR-layout set")
    p.add_argument("path", type=Path, help="folder with corpus.jsonl, queries.jsonl, qrels.tsv")
    p.add_argument("--max-queries", type=int, default=None, help="only the first N queries")
    add_json_flag(p)
    p.set_defaults(func=cmd_beir)

    p = kinds.add_parser(
        "agent-memory", help="our zh/en agent-memory set: every method vs the grep control"
    )
    p.add_argument("--set", type=Path, default=None, help="set folder (default: the bundled one)")
    p.add_argument("--per-kind", type=int, default=None, help="only the first N queries per kind")
    p.add_argument("--out", type=Path, default=None, help="write a report folder here")
    add_json_flag(p)
    p.set_defaults(func=cmd_agent_memory)

    p = kinds.add_parser(
        "staleness", help="verify over a scripted git history: stale precision/recall, "
        "relocations, stale facts injected"
    )
    p.add_argument("--steps", type=int, default=None, help="only the first N steps of the script")
    p.add_argument("--scale", type=int, default=50,
                   help="also time verify over N files of 20 facts each (0: skip; default 50)")
    p.add_argument("--out", type=Path, default=None,
                   help="write staleness.json and staleness.md here")
    add_json_flag(p)
    p.set_defaults(func=cmd_staleness)

    p = kinds.add_parser(
        "corrections", help="the prompt hook's correction detector: precision/recall on "
        "its labelled set, time per prompt, and an A/B of the hook"
    )
    p.add_argument("--ab", type=int, default=0,
                   help="also time the real prompt hook with and without it over N prompts "
                   "each, against a throwaway stack (0: skip)")
    p.add_argument("--fresh", type=int, default=30,
                   help="fresh interpreter runs timing its import and one call (0: skip)")
    add_json_flag(p)
    p.set_defaults(func=cmd_corrections)

    p = kinds.add_parser(
        "misses", help="miss counting: scripted sessions through the real hooks on two "
        "machines, each kind of repeat counted exactly"
    )
    add_json_flag(p)
    p.set_defaults(func=cmd_misses)

    p = kinds.add_parser(
        "all", help="agent-memory + every BEIR set under --data: report folder with plots"
    )
    p.add_argument("--data", type=Path, default=Path("../shared/evaldata"),
                   help="folder of BEIR sets (default ../shared/evaldata; missing: skipped)")
    p.add_argument("--out", type=Path, default=Path("evals/reports/latest"),
                   help="report folder (default evals/reports/latest)")
    p.add_argument("--max-queries", type=int, default=None,
                   help="only the first N queries of each BEIR set")
    p.add_argument("--per-kind", type=int, default=None,
                   help="only the first N agent-memory queries per kind")
    p.add_argument("--unanswerable", type=int, default=200,
                   help="foreign queries asked of each BEIR bank (default 200)")
    add_json_flag(p)
    p.set_defaults(func=cmd_all)

    b = sub.add_parser(
        "bench", help="ingest throughput, recall p50/p95 at 1k/10k/100k facts, hook wall time",
        description="Benchmarks on a stack of their own (Postgres from DATABASE_URL, else a "
        "throwaway embedded one): ingest throughput (single adds and a "
        "batch import), recall p50/p95 latency at each --sizes bank size, and the wall time of "
        "each hook event."
    )
    bench_arguments(b)
    b.set_defaults(func=cmd_bench)


def bench_arguments(parser: argparse.ArgumentParser) -> None:
    """`factbank bench`'s options (also `python -m factbank_evals.bench`'s)."""
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="bank sizes, comma-separated (default 1000,10000,100000)")
    parser.add_argument("--queries", type=int, default=40, help="queries per size and kind")
    parser.add_argument("--ingest-n", type=int, default=50,
                        help="single adds in the ingest bench (0: skip the ingest rows)")
    parser.add_argument("--ingest-batch", type=int, default=200,
                        help="facts in the batch import")
    parser.add_argument("--hook-runs", type=int, default=20,
                        help="runs per hook event (0: skip)")
    parser.add_argument("--drain-n", type=int, default=200,
                        help="facts the vector-queue drain bench imports (0: skip)")
    parser.add_argument("--out", default=None, help="also write bench.json and bench.md here")
    add_json_flag(parser)


def cmd_beir(args) -> int:
    import httpx

    from factbank_evals import beir
    from factbank_evals.stack import running_stack

    if not beir.is_beir(args.path):
        raise CommandError(f"{args.path} is not a BEIR folder (corpus.jsonl, queries.jsonl, "
                           "qrels.tsv)")
    data = beir.load(args.path)
    with running_stack(max_fact_chars=4000) as stack, \
            httpx.Client(headers=stack.headers(), timeout=600) as http:
        by_fact = beir.load_corpus(http, stack, data)
        result = beir.run_queries(http, stack, data, by_fact, max_queries=args.max_queries)
    row = {"set": data.name, "summary": result["summary"]}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(beir.format_table([row]))
    return 0


def _print_report(result: dict, out: Path | None, as_json: bool) -> int:
    from factbank_evals import report

    if out is not None:
        written = report.write(result, out)
        verdicts = written["verdicts"]
    else:
        verdicts = [report.go_no_go(s) for s in result["sets"]]
    if as_json:
        slim = {**result, "sets": [{k: v for k, v in s.items() if k != "records"}
                                   for s in result["sets"]], "go_no_go": verdicts}
        print(json.dumps(slim, indent=2, ensure_ascii=False, default=str))
        return 0
    print(report.go_no_go_table(verdicts))
    print()
    print(report.methods_table(result["sets"]))
    if out is not None:
        print(f"\nreport: {out / 'report.md'}")
    return 0


def cmd_agent_memory(args) -> int:
    import httpx

    from factbank_evals import agent_memory as am
    from factbank_evals import run_all
    from factbank_evals.stack import running_stack

    path = args.set or am.SET_DIR
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=600) as http:
        run_all.quiet()
        section = am.evaluate(http, stack, path=path, per_kind=args.per_kind)
    result = run_all.envelope([section], None, {"per_kind": args.per_kind}, 0.0)
    return _print_report(result, args.out, args.json)


def cmd_staleness(args) -> int:
    from factbank_evals import run_all, staleness
    from factbank_evals.stack import running_stack

    with running_stack() as stack:
        run_all.quiet()
        result = staleness.evaluate(stack, steps=args.steps, progress=not args.json)
        if args.scale:
            result["scale"] = staleness.scale(stack, n_files=args.scale)
    if args.out:
        for path in staleness.write_report(result, args.out):
            print(f"wrote {path}")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(staleness.format_table(result))
        if result.get("scale"):
            print("\n" + staleness.format_scale(result["scale"]))
    return 0


def cmd_corrections(args) -> int:
    from factbank_evals import corrections, run_all

    run_all.quiet()
    result = corrections.evaluate(ab=args.ab, fresh=args.fresh)
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json
          else corrections.table(result))
    return 0 if result["meets_target"] else 1


def cmd_misses(args) -> int:
    from factbank_evals import misses, run_all

    run_all.quiet()
    result = misses.evaluate()
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json
          else misses.table(result))
    return 0 if result["exact"] else 1


def cmd_all(args) -> int:
    from factbank_evals import run_all

    data = args.data if args.data and args.data.is_dir() else None
    if args.data and data is None:
        print(f"no BEIR folder at {args.data}: running agent-memory only")
    result = run_all.run(
        data,
        max_queries=args.max_queries,
        per_kind=args.per_kind,
        n_foreign=args.unanswerable,
        partial=args.out / "partial.json" if args.out else None,
    )
    if args.out:
        (args.out / "partial.json").unlink(missing_ok=True)
    from factbank_evals import gate

    result["regression"] = gate.against_last(result)
    if result["regression"] and not args.json:
        print(gate.markdown(result["regression"]) + "\n")
    return _print_report(result, args.out, args.json)


def cmd_bench(args) -> int:
    from factbank_evals import bench

    return bench.run_cli(args)
