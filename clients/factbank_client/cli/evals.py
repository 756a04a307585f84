"""`factbank eval ...` and `factbank bench`: measurements against a real, throwaway stack.

They need the server extra (they start Postgres and both services themselves), and read eval
data from wherever it is (e.g. ../shared/evaldata); nothing is copied into the project.
"""

from __future__ import annotations

import json
from pathlib import Path

from factbank_client.cli.main import CommandError
from factbank_client.cli.output import add_json_flag


def register(sub) -> None:
    ev = sub.add_parser("eval", help="retrieval evals against a throwaway stack")
    kinds = ev.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = kinds.add_parser("beir", help="R@5, MRR@10, nDCG@10, latency on a BEIR-layout set")
    p.add_argument("path", type=Path, help="folder with corpus.jsonl, queries.jsonl, qrels.tsv")
    p.add_argument("--max-queries", type=int, default=None, help="only the first N queries")
    add_json_flag(p)
    p.set_defaults(func=cmd_beir)


def cmd_beir(args) -> int:
    try:
        import httpx

        from factbank_evals import beir
        from factbank_evals.stack import running_stack
    except ImportError as exc:
        raise CommandError("evals need the server extra: pip install 'factbank[server]'") from exc
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
