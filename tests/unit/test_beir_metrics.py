"""The evals' one BEIR loader, one metrics module and one percentile.

Two loaders parsed qrels.tsv differently: `beir.load` skipped any first line whose last
column was not an integer (so a headerless file with graded scores lost its first judgement,
and `int()` of the next graded score failed), the fusion sweep's skipped the first line only
when it said "query-id" (any other header crashed `float("score")`). The one left takes the
first line for a header exactly when its score is not a number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from factbank_evals import beir, metrics


def _write(folder: Path, qrels: str, queries: list[tuple[str, str]]) -> Path:
    folder.mkdir()
    docs = [{"_id": "d1", "title": "Title", "text": "one"}, {"_id": 2, "text": "two"},
            {"_id": "d3", "text": "three"}]
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps(d) for d in docs) + "\n\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, t in queries) + "\n",
        encoding="utf-8")
    (folder / "qrels.tsv").write_bytes(qrels.encode("utf-8"))
    return folder


QUERIES = [("q2", "second"), ("q1", "first"), ("q3", "unjudged"), ("q4", "only zero")]


def test_the_header_is_the_first_line_whose_score_is_not_a_number(tmp_path):
    named = beir.load(_write(tmp_path / "named", "qid\tdocid\trel\nq1\td1\t1\n", QUERIES))
    assert named.qrels == {"q1": {"d1"}}
    headerless = beir.load(_write(tmp_path / "bare", "q1\td1\t1.0\nq2\t2\t0.5\n", QUERIES))
    assert headerless.qrels == {"q1": {"d1"}, "q2": {"2"}}  # the first judgement is kept


def test_scores_above_zero_are_relevant_crlf_and_short_lines_are_fine(tmp_path):
    qrels = ("query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq1\t2\t2\r\nq2\td3\t0\r\n"
             "q2\t2\t1\r\nq4\td1\t0\r\nq4\td3\t-1\r\n\r\nq9\n")
    data = beir.load(_write(tmp_path / "set", qrels, QUERIES))
    assert data.qrels == {"q1": {"d1", "2"}, "q2": {"2"}}
    # Only judged queries, in the file's order; a document is its text alone (no title).
    assert data.queries == {"q2": "second", "q1": "first"}
    assert data.corpus == {"d1": "one", "2": "two", "d3": "three"}
    assert (data.doc_ids, data.doc_texts) == (["d1", "2", "d3"], ["one", "two", "three"])
    assert (data.query_ids, data.query_texts) == (["q2", "q1"], ["second", "first"])
    assert data.name == "set" and beir.is_beir(tmp_path / "set")


def test_a_score_that_is_not_a_number_after_the_header_names_its_line(tmp_path):
    folder = _write(tmp_path / "bad", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\tyes\n",
                    QUERIES)
    with pytest.raises(ValueError, match=r"qrels.tsv:3: score 'yes' is not a number"):
        beir.load(folder)


def test_metrics_by_hand():
    ranked = [[7, 2, 3], [4, 5, 6, 8, 9, 1], []]
    relevant = [{2}, {1, 4}, {3}]
    # R@5: 1, 1/2 (1 is 6th), 0.  MRR@10: 1/2, 1, 0.  nDCG@10: 1/log2(3), (1 + 1/log2(7)) /
    # (1 + 1/log2(3)), 0.
    got = metrics.mean_at_cutoffs(ranked, relevant)
    assert got["R@5"] == pytest.approx((1 + 0.5) / 3)
    assert got["MRR@10"] == pytest.approx((0.5 + 1) / 3)
    ndcg = (1 / math.log2(3) + (1 + 1 / math.log2(7)) / (1 + 1 / math.log2(3))) / 3
    assert got["nDCG@10"] == pytest.approx(ndcg)
    assert metrics.mean_at_cutoffs([], []) == {"R@5": 0.0, "MRR@10": 0.0, "nDCG@10": 0.0}
    scored = metrics.score(["a", "b"], {"b"}, 12.5)
    assert scored == {"r@5": 1.0, "mrr@10": 0.5, "ndcg@10": pytest.approx(1 / math.log2(3)),
                      "ms": 12.5}
    assert metrics.recall_at(["a"], set()) == 0.0


def test_percentile_is_the_nearest_rank():
    values = [float(v) for v in range(20, 0, -1)]  # 20 .. 1, unsorted on purpose
    assert metrics.percentile(values, 0.95) == 20.0
    assert metrics.percentile(values, 0.5) == 11.0
    assert metrics.percentile([3.0], 0.95) == 3.0
    assert math.isnan(metrics.percentile([], 0.5))
