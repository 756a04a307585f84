"""`factbank bench` prints a verdict for each five-vector target, from the figures of one run."""

from __future__ import annotations

from factbank_evals import bench


def _size(cold: float, cached: float, fill_s: float, toy: float | None = None) -> dict:
    row = {
        "cold": {"p50_ms": cold}, "embedding_cached": {"p50_ms": cached},
        "cache_hit": {"p50_ms": 1.0}, "bm25_only": {"p50_ms": 3.0},
        "fill": {"seconds": fill_s},
    }
    if toy is not None:
        row["toy"] = {"bm25_cosine_embed": {"p50_ms": toy}, "cosine_only": {"p50_ms": 20.0}}
    return row


def result(cold_big: float, cached_big: float, toy_big: float, alone: float, drained: float,
           hook: float) -> dict:
    return {
        "recall": {1000: _size(30.0, 10.0, 5.0), 100_000: _size(cold_big, cached_big, 100.0,
                                                                 toy_big)},
        "drain": {"runs": [{"run": "worker inside ingest", "facts_per_s": drained,
                            "alone_facts_per_s": alone}]},
        "hooks": {"rows": {"python -I -S (interpreter only)": {"p50_ms": 10.0},
                           "user-prompt-submit": {"p50_ms": hook}}},
    }


def verdicts(r: dict) -> dict[str, bool]:
    return {t["target"]: t["ok"] for t in bench.targets(r)}


def verdict(v: dict[str, bool], *words: str) -> bool:
    """The one verdict whose target names every word."""
    (ok,) = [ok for target, ok in v.items() if all(w in target for w in words)]
    return ok


def test_every_target_passes_when_met():
    v = verdicts(result(cold_big=40.0, cached_big=19.0, toy_big=300.0, alone=20.0,
                        drained=17.0, hook=39.0))
    assert all(v.values()), v
    assert any(k.startswith("fill to 100,000") for k in v)
    assert any("queue drain" in k for k in v) and any(k.startswith("hook ") for k in v)


def test_each_target_fails_on_its_own_figure():
    v = verdicts(result(cold_big=46.0, cached_big=21.0, toy_big=400.0, alone=20.0,
                        drained=15.0, hook=41.0))
    assert not verdict(v, "cold p50 at 100,000", "1.5x")  # x1.53 of 1k
    assert verdict(v, "cold p50 at 100,000", "toy")  # 46 / 400 = 0.115 of the toy
    assert not verdict(v, "query-embedding-cached")  # x2.1
    assert not verdict(v, "queue drain")  # 0.75 of the embedder alone
    assert not verdict(v, "hook user-prompt-submit")  # x4.1
    assert verdict(v, "cold p50 at 100,000 < 50 ms")
    toy = verdicts(result(cold_big=40.0, cached_big=19.0, toy_big=200.0, alone=20.0,
                          drained=17.0, hook=39.0))
    assert not verdict(toy, "toy")  # 40 / 200 = 0.20 of the toy
    assert verdict(toy, "cold p50 at 100,000", "1.5x")  # x1.33 of 1k


def test_step_means_come_from_the_histograms_difference():
    """The mean of each recall step between two reads of /metrics: the difference of the sums
    over the difference of the counts; a step that did not run in between is left out."""
    before = {"embed": (1.0, 10.0), "dense": (0.5, 20.0), "rank": (0.2, 20.0)}
    after = {"embed": (1.0, 10.0), "dense": (0.9, 30.0), "rank": (0.25, 30.0),
             "rows": (0.03, 10.0)}
    assert bench.stage_means(before, after) == {"dense": 40.0, "rank": 5.0, "rows": 3.0}


def test_the_table_prints_each_steps_mean_in_recall_order():
    r = result(cold_big=40.0, cached_big=19.0, toy_big=300.0, alone=20.0, drained=17.0,
               hook=39.0)
    r["recall"][100_000]["stages"] = {
        "cold": {"search": 30.1, "embed": 20.5, "dense": 8.2},
        "embedding_cached": {"rows": 2.0, "dense": 9.0, "lexical": 4.0}}
    r.update(sizes=[1000, 100_000], cpus=2, load_avg=[0.5], code=None)
    for row in r["recall"].values():
        for key in ("cold", "embedding_cached", "cache_hit", "bm25_only"):
            row[key]["p95_ms"] = row[key]["p50_ms"]
        row["toy"] = None
    r["drain"] = r["hooks"] = None
    r["targets"] = []
    lines = [x for x in bench.table(r).splitlines() if "mean ms a step" in x]
    assert lines == [
        "| recall @ 100,000 facts, cold: mean ms a step (the legs run at once) | "
        "embed 20.5, dense 8.2, search 30.1 |",
        "| recall @ 100,000 facts, query embedding cached: mean ms a step (the legs run at "
        "once) | lexical 4.0, dense 9.0, rows 2.0 |"]
