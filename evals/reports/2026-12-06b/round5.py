"""Bare facts in mixed banks, fifth round: two more ways to add information automatically.

Not part of the product: the script behind bare-facts-5.md in this folder. In memory, on the
agent-memory dev set's three banks (bare, half-questions, questions), ranked as the service
ranks (`factbank_evals.dev_sets.rankings`: the same candidates, fusion and cohort):

- **self-query vector**: every fact without writer questions gets one more vector, its own
  indexed text embedded with e5's `query: ` prefix (e5's advice for symmetric tasks such as
  paraphrase retrieval and bitext mining), counted as a question (`as question`) or as another
  own vector (`as own`). The one "question" a bare fact could get with no writer.
- **query form**: the query embedded as a passage (`passage: `), or the normalised sum of
  both forms (`mix`), instead of as a query, against the same fact vectors.

The self-query vector is also tried on the single-language XQuAD-R and tatoeba dev sets
(every fact there is bare), where item 1 of the task (never below plain cosine) must hold.

    python evals/reports/2026-12-06b/round5.py [--data ../shared/evaldata]
    # a minute on the agent banks, two more for the dev sets' query-prefix embeddings
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from factbank.text.lexicon import indexed_text
from factbank.text.tokenizer import language
from factbank_evals import agent_memory as am
from factbank_evals import beir
from factbank_evals import dev_sets as ds
from factbank_evals import fusion_sweep as fs

SPLITS = ("all", "paraphrase", "paraphrase en", "paraphrase zh", "crosslingual",
          "crosslingual en", "crosslingual zh", "exact")
CONFIGS = ("bare", "half-questions", "questions")
_embed = fs.embed_cached


def self_query_bank(bank: ds.Bank, config: str, as_question: bool) -> ds.Bank:
    facts, _ = am.load_set(am.SET_DIR, "questions" if config == "half-questions" else config)
    texts = [indexed_text(f["content"], f["tags"]) for f in facts]
    with_questions = {int(f) for f, q in zip(bank.vec_fact, bank.vec_question, strict=True) if q}
    add = [i for i in range(len(texts)) if i not in with_questions]
    vecs = _embed([texts[i] for i in add], "query")
    return ds.Bank(bank.name, np.concatenate([bank.vec_fact, np.array(add, dtype=int)]),
                   np.vstack([bank.vecs, vecs]),
                   bank.vec_lang + [language(texts[i]) for i in add],
                   bank.vec_question + [as_question] * len(add),
                   bank.lexical_texts, bank.fact_lang, bank.fact_tagged)


def query_form(form: str):
    """fs.embed_cached with the queries embedded in `form` (query, passage, mix)."""
    def embed(texts, kind):
        if kind != "query" or form == "query":
            return _embed(texts, kind)
        p = _embed(texts, "passage")
        if form == "passage":
            return p
        v = _embed(texts, "query") + p
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    return embed


def rows(config: str) -> list[tuple[str, dict]]:
    bank, queries, succ = ds.agent_memory_bank(config)
    out = [("product (as landed)", ds.r5_by_kind(queries, ds.rankings(bank, queries, succ)))]
    for as_q in (True, False):
        b = self_query_bank(bank, config, as_q)
        out.append((f"self-query vector, as {'question' if as_q else 'own'}",
                    ds.r5_by_kind(queries, ds.rankings(b, queries, succ))))
    for form in ("passage", "mix"):
        fs.embed_cached = query_form(form)
        try:
            out.append((f"query embedded as {form}",
                        ds.r5_by_kind(queries, ds.rankings(bank, queries, succ))))
        finally:
            fs.embed_cached = _embed
    return out


def dev_set_rows(data: Path, name: str) -> tuple[dict, dict]:
    """R@5 (all) per method on a BEIR dev set as landed, and with a self-query vector a fact."""
    s = beir.load(data / name)
    bank, queries, succ = ds.beir_bank(s)
    base = ds.r5_by_kind(queries, ds.rankings(bank, queries, succ))
    n = len(s.doc_texts)
    b = ds.Bank(bank.name, np.concatenate([bank.vec_fact, np.arange(n)]),
                np.vstack([bank.vecs, _embed(s.doc_texts, "query")]),
                bank.vec_lang + [language(t) for t in s.doc_texts],
                bank.vec_question + [True] * n, bank.lexical_texts, bank.fact_lang,
                bank.fact_tagged)
    return base, ds.r5_by_kind(queries, ds.rankings(b, queries, succ))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("../shared/evaldata"))
    args = parser.parse_args()
    for config in CONFIGS:
        table = rows(config)
        splits = [s for s in SPLITS if s in table[0][1]["cosine"]]
        print(f"\n### agent-memory ({config})\n")
        print("| variant | method | " + " | ".join(splits) + " |")
        print("|---|---|" + "---|" * len(splits))
        for name, r in table:
            for method in ("cosine", "dense", "hybrid"):
                print(f"| {name} | {method} | "
                      + " | ".join(f"{r[method][s]:.3f}" for s in splits) + " |")
    print("\n### single-language dev sets, self-query vector (as question) on every fact\n")
    print("| set | cosine | dense | hybrid | with it: cosine | dense | hybrid |")
    print("|---|---|---|---|---|---|---|")
    for name in ("xquad-r-zh2zh", "xquad-r-en2zh", "xquad-r-zh2en", "tatoeba-zh2en"):
        base, with_it = dev_set_rows(args.data, name)
        cells = [f"{r[m]['all']:.3f}" for r in (base, with_it)
                 for m in ("cosine", "dense", "hybrid")]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
