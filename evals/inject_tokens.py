"""What the "matched" notes cost: tokens per prompt block on the agent-memory set, before and
after (read/why.py).

One stack, one bank, the set loaded as a configuration saves it (default tags+questions).
For every query, the hits a prompt block is built from (`POST /v1/search` as `prompt_block`
asks: floor on, 3 x PROMPT_TOP results, then `inject.prompt_hits`) are rendered twice by the
service's own code, without the notes (before) and with them (after), inside the same
budget, so the comparison is exact on the same hits. The real `POST /v1/inject` answer of a
fresh session is counted too (it must agree with "after"). Also printed: how many facts each
block holds (a note may push a line out of the budget) and which kind of note was given.

    python -m factbank_evals.inject_tokens [--config tags+questions] [--per-kind N]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence

import httpx
import msgspec

from factbank_evals import agent_memory
from factbank_evals.stack import timed_post


def _hits(results: Sequence[dict]):
    from factbank.models import Hit

    return [msgspec.convert(r, Hit, strict=False) for r in results]


def blocks(hits, prompt: str) -> tuple[object, object, list[str]]:
    """The prompt block without and with the notes, and the kind of each note given."""
    from factbank.read import inject, why

    chosen = inject.prompt_hits(hits, set())[: inject.PROMPT_TOP]
    before = inject.assemble([(h.fact.id, inject.line_for(h.fact, inject._via_note(h)))
                              for h in chosen], inject.PROMPT_BUDGET, "eval")
    notes = [why.note(h, prompt) for h in chosen]
    after = inject.assemble([(h.fact.id, inject.line_for(h.fact, inject._via_note(h) + n))
                             for h, n in zip(chosen, notes, strict=True)],
                            inject.PROMPT_BUDGET, "eval")
    kinds = ["question" if n.startswith(' [matched: "') else "words" if "words" in n
             else "meaning" if n else "none" for n in notes]
    return before, after, kinds


def measure(http: httpx.Client, stack, cases) -> dict:
    from factbank.read import inject

    rows = {"before": [], "after": [], "service": [], "facts_before": [], "facts_after": []}
    kinds: dict[str, int] = {}
    for case in cases:
        body, _ = timed_post(http, stack.recall + "/v1/search",
                             {"query": case.text, "limit": inject.PROMPT_TOP * 3,
                              "floor": True})
        before, after, given = blocks(_hits(body["results"]), case.text)
        served, _ = agent_memory._inject(http, stack, case.text)
        rows["before"].append(before.tokens)
        rows["after"].append(after.tokens)
        rows["service"].append(served["tokens"])
        rows["facts_before"].append(len(before.facts))
        rows["facts_after"].append(len(after.facts))
        for k in given:
            kinds[k] = kinds.get(k, 0) + 1
    given_any = [i for i, t in enumerate(rows["before"]) if t]

    def stat(key: str, idx: Sequence[int] | None = None) -> dict:
        values = [rows[key][i] for i in (idx if idx is not None else range(len(rows[key])))]
        if not values:
            return {"mean": 0, "p50": 0, "max": 0}
        return {"mean": round(statistics.fmean(values), 1),
                "p50": statistics.median(values), "max": max(values)}

    return {
        "prompts": len(cases),
        "prompts_with_a_block": len(given_any),
        "budget": inject.PROMPT_BUDGET,
        "all": {k: stat(k) for k in rows},
        "with_a_block": {k: stat(k, given_any) for k in rows},
        "notes": kinds,
    }


def table(result: dict) -> str:
    lines = [
        f"agent-memory ({result['config']}): {result['prompts']} prompts, "
        f"{result['prompts_with_a_block']} with a block; budget {result['budget']} tokens",
        "",
        "| prompts | tokens/prompt before (mean / p50 / max) | after | served by /v1/inject "
        "| facts/block before | after |",
        "|---|---|---|---|---|---|",
    ]
    for scope in ("all", "with_a_block"):
        s = result[scope]

        def cell(k: str, s: dict = s) -> str:
            return f"{s[k]['mean']} / {s[k]['p50']} / {s[k]['max']}"

        lines.append(f"| {scope.replace('_', ' ')} | {cell('before')} | {cell('after')} | "
                     f"{cell('service')} | {s['facts_before']['mean']} | "
                     f"{s['facts_after']['mean']} |")
    total = sum(result["notes"].values()) or 1
    lines += ["", "| note given | lines | share |", "|---|---|---|"]
    lines += [f"| {k} | {n} | {n / total:.2f} |" for k, n in sorted(result["notes"].items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m factbank_evals.inject_tokens",
        description="Tokens per prompt block on the agent-memory set without and with the "
        "'matched' notes, on the same hits.")
    ap.add_argument("--config", default=agent_memory.DEFAULT_CONFIG,
                    choices=list(agent_memory.CONFIGS))
    ap.add_argument("--per-kind", type=int, default=None,
                    help="only the first N queries of each kind")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from factbank_evals import run_all
    from factbank_evals.stack import running_stack

    run_all.quiet()
    facts, cases = agent_memory.load_set(config=args.config)
    if args.per_kind:
        cases = agent_memory.subset(cases, args.per_kind)
    with running_stack() as stack, httpx.Client(headers=stack.headers(), timeout=600) as http:
        agent_memory.ingest(http, stack, facts)
        result = {"config": args.config, **measure(http, stack, cases)}
    print(json.dumps(result, indent=1) if args.json else table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
