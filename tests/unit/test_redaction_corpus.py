"""Redaction on secrets we did not write: the fixture corpus (evals/sets/secrets/corpus.jsonl).

The targets of issue 12 item 9 are >= 0.95 of the secrets caught and >= 0.90 of the
look-alikes kept. They are asserted on the dev split (what redaction was tuned on) and on the
whole corpus. The held-out split (whole families nobody looked at while tuning) does not meet
them yet: a regression floor guards what it measures now, and a strict xfail states the target,
so the day it is met the xfail fails and must be turned into a plain assertion.
"""

from __future__ import annotations

import statistics
import time

import pytest

from factbank.write.redaction import redact_text, warm_up
from factbank_evals.redaction_recall import (
    TARGET_CAUGHT,
    TARGET_KEPT,
    TYPICAL_FACT,
    evaluate,
    load,
)


@pytest.fixture(scope="module")
def result() -> dict:
    warm_up()
    return evaluate(load())


def test_corpus_has_both_sides_and_both_splits() -> None:
    rows = load()
    assert len(rows) >= 1000
    for split in ("dev", "heldout"):
        part = [r for r in rows if r["split"] == split]
        assert sum(r["expected"] == "secret" for r in part) >= 200
        assert sum(r["expected"] == "lookalike" for r in part) >= 100
    families = {r["family"] for r in rows}
    dev = {r["family"] for r in rows if r["split"] == "dev"}
    held = {r["family"] for r in rows if r["split"] == "heldout"}
    assert not dev & held, "a family is either tuned on or held out, never both"
    assert len(held) >= 30 and len(families) >= 100
    assert all(r["source"] and r["license"] for r in rows)


@pytest.mark.parametrize("split", ["dev", "all"])
def test_targets(result: dict, split: str) -> None:
    t = result["overall"][split]
    print(f"\n{split}: {t}")
    assert t["caught_share"] >= TARGET_CAUGHT
    assert t["kept_share"] >= TARGET_KEPT


def test_held_out_does_not_regress(result: dict) -> None:
    t = result["overall"]["heldout"]
    print(f"\nheldout: {t}")
    assert t["caught_share"] >= 0.88
    assert t["kept_share"] >= 0.88


@pytest.mark.xfail(strict=True, reason="held-out misses: see the README's redaction section")
def test_held_out_meets_the_targets(result: dict) -> None:
    t = result["overall"]["heldout"]
    assert t["caught_share"] >= TARGET_CAUGHT and t["kept_share"] >= TARGET_KEPT


@pytest.mark.parametrize(
    "family",
    ["gitleaks:azure", "gitleaks:aws", "gitleaks:sourcegraph", "gitleaks:intra42", "gitleaks:curl"],
)
def test_the_families_the_outside_probe_saw_leak(result: dict, family: str) -> None:
    t = result["by_family"][family]
    assert t["caught_share"] >= 0.95, t
    assert t["kept_share"] is None or t["kept_share"] >= 0.75, t


def test_a_typical_fact_is_redacted_in_well_under_5_ms() -> None:
    warm_up()
    redact_text(TYPICAL_FACT)
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        redact_text(TYPICAL_FACT)
        samples.append(time.perf_counter() - start)
    assert statistics.median(samples) < 0.005


@pytest.mark.parametrize(
    "text",
    [
        "http://a:b" * 10_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" * 3_200,
        "//a/" * 25_000 + ":_authToken=x",
        'key="' * 20_000,
        "token: abc1 " * 8_400,
        "curl -u a:b " * 8_400,
        "the key for prod in vault is " * 3_500,
        "abc8Q~" * 16_700,
        "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY" * 3_200,
        "中文测试句子，密码是" * 10_000,
    ],
    ids=[
        "urls",
        "pem-headers",
        "npm-authtoken",
        "quoted-keys",
        "tokens",
        "user-flags",
        "prose",
        "azure",
        "base62",
        "chinese",
    ],
)
def test_100_kb_adversarial_input_stays_linear(text: str) -> None:
    """~100 KB on one line: each took 3-8 s before (quadratic regexes); now well under 1 s on
    a quiet machine. The bound is 3 s because CI shares two cores with other work."""
    warm_up()
    start = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - start < 3.0
