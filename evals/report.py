"""The eval report: the go/no-go verdict, the method tables, JSON and PNG plots in one folder.

The go/no-go rule is the user's: hybrid recall earns its place over grep when its
accuracy (R@5 on answerable queries) is at least 15 points better, or when it is equal and
costs at most a third of grep's tokens and a third of its latency. It is printed as measured,
whatever it says.

Definitions used here, so the verdict can be checked by hand:
- hybrid = `hybrid+floor`, what an agent is actually given (a wrong refusal counts as a miss);
- accuracy = R@5 over the set's answerable queries;
- "equal" = not more than 2 points worse than grep (EQUAL_POINTS);
- tokens = mean tokens per query: for hybrid the real `/v1/inject` prompt block where the set
  ran it (agent-memory), else the same block assembled from the top 5 results by the same
  code (`factbank.read.inject`); for grep every line grep printed;
- latency = p50 wall time per query on this machine: HTTP round trip on loopback for factbank
  (the query embedding is cold on this call), the grep subprocess plus ranking for grep.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from factbank_evals import gate

ACCURACY_POINTS = 15.0
EQUAL_POINTS = 2.0
RATIO = 1 / 3
HYBRID = "hybrid+floor"
METHOD_ORDER = ("grep", "bm25", "cosine", "rrf", "dense", "hybrid", "hybrid+floor", "inject")


def _f(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def go_no_go(section: dict) -> dict:
    s = section["summary"]
    g, h = s["grep"], s[HYBRID]
    h_tokens = s["inject"]["tokens_mean"] if "inject" in s else h["tokens_mean"]
    g_tokens = g["tokens_mean"]
    delta = None if g["r@5"] is None or h["r@5"] is None else round((h["r@5"] - g["r@5"]) * 100, 1)
    tok_ratio = h_tokens / g_tokens if g_tokens else math.inf
    lat_ratio = h["p50_ms"] / g["p50_ms"] if g["p50_ms"] else math.inf
    if delta is None:
        verdict, why = "n/a", "no answerable queries"
    elif delta >= ACCURACY_POINTS:
        verdict, why = "PASS", f"R@5 +{delta} points (>= {ACCURACY_POINTS:g})"
    elif delta >= -EQUAL_POINTS and tok_ratio <= RATIO and lat_ratio <= RATIO:
        verdict, why = "PASS", "equal accuracy at <= 1/3 tokens and latency"
    else:
        reasons = [f"R@5 {delta:+} points (needs +{ACCURACY_POINTS:g})"]
        if delta < -EQUAL_POINTS:
            reasons.append("not equal either")
        else:
            if tok_ratio > RATIO:
                reasons.append(f"tokens x{tok_ratio:.2f} of grep (needs <= 0.33)")
            if lat_ratio > RATIO:
                reasons.append(f"latency x{lat_ratio:.2f} of grep (needs <= 0.33)")
        verdict, why = "FAIL", "; ".join(reasons)
    return {
        "set": section["set"],
        "grep_r@5": g["r@5"],
        "hybrid_r@5": h["r@5"],
        "delta_points": delta,
        "grep_tokens": g_tokens,
        "hybrid_tokens": h_tokens,
        "token_ratio": round(tok_ratio, 3) if math.isfinite(tok_ratio) else None,
        "grep_p50_ms": g["p50_ms"],
        "hybrid_p50_ms": h["p50_ms"],
        "latency_ratio": round(lat_ratio, 3) if math.isfinite(lat_ratio) else None,
        "verdict": verdict,
        "why": why,
    }


def table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header, its separator, one line per row of cells."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def go_no_go_table(rows: list[dict]) -> str:
    columns = ["set", "grep R@5", "hybrid R@5", "Δ points", "grep tokens", "hybrid tokens",
               "grep p50 ms", "hybrid p50 ms", "verdict", "why"]
    return table(columns, [
        [r["set"], _f(r["grep_r@5"]), _f(r["hybrid_r@5"]), _f(r["delta_points"], 1),
         _f(r["grep_tokens"], 0), _f(r["hybrid_tokens"], 0), _f(r["grep_p50_ms"], 1),
         _f(r["hybrid_p50_ms"], 1), f"**{r['verdict']}**", r["why"]]
        for r in rows])


def methods_table(sections: list[dict]) -> str:
    columns = ["set", "method", "R@5", "MRR@10", "nDCG@10", "refusal P", "refusal R",
               "wrong refusals", "stale@5", "tokens", "p50 ms", "p95 ms"]
    return table(columns, [
        [sec["set"], m, _f(s["r@5"]), _f(s["mrr@10"]), _f(s["ndcg@10"]),
         _f(s["refusal_precision"]), _f(s["refusal_recall"]), _f(s["wrong_refusals"]),
         _f(s["stale@5"]), _f(s["tokens_mean"], 0), _f(s["p50_ms"], 1), _f(s["p95_ms"], 1)]
        for sec in sections for m in METHOD_ORDER if (s := sec["summary"].get(m))])


def kinds_table(section: dict) -> str:
    kinds = sorted({k for s in section["summary"].values() for k in s["r@5_by_kind"]})
    columns = ["method", *(f"R@5 {k}" for k in kinds), "refusal R", "stale@5"]
    return table(columns, [
        [m, *(_f(s["r@5_by_kind"].get(k)) for k in kinds), _f(s["refusal_recall"]),
         _f(s["stale@5"])]
        for m in METHOD_ORDER if (s := section["summary"].get(m))])


def _code_line(code: dict | None) -> str:
    if not code:
        return "Code: unknown (not a git checkout)."
    dirty = code.get("uncommitted") or []
    extra = f", plus uncommitted changes to {', '.join(dirty)}" if dirty else ""
    return f"Code measured: commit {code['commit']}{extra}."


def markdown(result: dict, verdicts: list[dict]) -> str:
    am = [s for s in result["sets"] if s["kind"] == "agent-memory"]
    parts = [
        "# factbank eval report",
        "",
        f"Generated {result['generated']} in {result['seconds']} s; embedder "
        f"`{result.get('embedder')}`; recall floor (read from the running service) "
        f"{_f(result.get('floor'))}; options {json.dumps(result.get('options'))}.",
        "",
        _code_line(result.get("code")),
        "",
        "## Go / no-go: hybrid recall vs the grep control",
        "",
        f"PASS when hybrid R@5 (answerable queries, with the floor: what an agent gets) is at "
        f"least {ACCURACY_POINTS:g} points above grep's, or within {EQUAL_POINTS:g} points of "
        "it at no more than a third of grep's tokens and a third of its p50 latency.",
        "",
        go_no_go_table(verdicts),
        "",
    ]
    if am:
        parts += [
            f"## {am[0]['set']}: R@5 by query kind",
            "",
            kinds_table(am[0]),
            "",
            f"Ingest: {json.dumps(am[0]['ingest'])}",
            "",
        ]
    parts += [
        *(["## Regression gate: against the last committed report", "",
            gate.markdown(result["regression"]), ""] if result.get("regression") else []),
        "## Every method on every set",
        "",
        methods_table(result["sets"]),
        "",
        "Columns: R@5, MRR@10, nDCG@10 over answerable queries (a refusal scores 0); refusal "
        "P/R: returning nothing, as a prediction that the query is unanswerable; wrong "
        "refusals: share of answerable queries that got nothing; stale@5: chronology queries "
        "with the superseded fact in the top 5 (`inject`: injected); tokens: mean per query "
        "(grep: every printed line; `inject`: the real /v1/inject prompt block; others: the "
        "block their top 5 would make); latency: wall time per query on this machine, "
        "loopback HTTP for factbank. `hybrid+floor` runs first for each query, so it alone "
        "pays the query embedding; the other modes find it cached by the service.",
        "",
        "Unanswerable queries: agent-memory's refusal queries; for a BEIR set, a sample of "
        "another set's queries (named in the JSON as `unanswerable_from`).",
        "",
        "![recall by method](recall_by_method.png)",
        "",
        "![score distributions](score_distributions.png)",
        "",
    ]
    return "\n".join(parts)


def plot_recall(sections: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in METHOD_ORDER if m != "inject"]
    names = [s["set"] for s in sections]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(names)), 3.6))
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        vals = [(s["summary"].get(m) or {}).get("r@5") or 0.0 for s in sections]
        xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, vals, width, label=m)
    ax.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
    ax.set_ylabel("R@5 (answerable)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=len(methods), loc="upper center", bbox_to_anchor=(0.5, 1.18))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_distributions(sections: list[dict], floor: float | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(sections)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), squeeze=False)
    bins = [i / 40 for i in range(41)]
    for ax, sec in zip(axes.flat, sections, strict=False):
        d = sec["distributions"]
        ax.hist(d["answerable"], bins=bins, alpha=0.6, label="answerable", color="tab:blue")
        ax.hist(d["unanswerable"], bins=bins, alpha=0.6, label="unanswerable", color="tab:red")
        if floor is not None:
            ax.axvline(floor, color="black", linestyle="--", linewidth=1, label=f"floor {floor:g}")
        ax.set_title(sec["set"], fontsize=9)
        ax.set_xlabel("hybrid top relevance", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_yscale("log")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write(result: dict, out: Path) -> dict:
    """Render the report folder: report.md, report.json (everything but per-query records),
    records.jsonl (per query and method), two PNGs. Returns the verdicts."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    verdicts = [go_no_go(s) for s in result["sets"]]
    # Per-query records go to their own JSONL (one line per query and method), so report.json
    # stays small enough to read and diff.
    lines = [
        json.dumps({"set": sec["set"], "method": m, **rec}, ensure_ascii=False, default=str)
        for sec in result["sets"]
        for m, recs in (sec.get("records") or {}).items()
        for rec in recs
    ]
    sets = [{k: v for k, v in sec.items() if k != "records"} for sec in result["sets"]]
    result = {**result, "sets": sets, "go_no_go": verdicts}
    (out / "report.json").write_text(
        json.dumps(result, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    (out / "records.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "report.md").write_text(markdown(result, verdicts), encoding="utf-8")
    plot_recall(result["sets"], out / "recall_by_method.png")
    plot_distributions(result["sets"], result.get("floor"), out / "score_distributions.png")
    return {"verdicts": verdicts, "markdown": out / "report.md"}
