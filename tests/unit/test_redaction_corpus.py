"""Redaction on secrets we did not write: the fixture corpora (evals/sets/secrets/).

The targets (docs/principles.md#secrets-never-land) are >= 0.95 of the secrets caught and >=
0.90 of the look-alikes kept. They are asserted on the dev split (what redaction was tuned on)
and on both corpora together. ``heldout`` (families held out of corpus.jsonl) and ``heldout2``
(the second corpus, heldout2.jsonl) do not meet the caught target yet: a regression floor
guards what each measures now, and a strict xfail states the target, so the day it is met the
xfail fails and must be turned into a plain assertion. Both were read while tuning (heldout2
only after its one honest measurement, 0.823 / 0.954; README.md beside the corpora), so the
floors guard against regressions, not overfitting; the outside probe's corpus is the held-out
test."""

from __future__ import annotations

import statistics
import time

import pytest

from factbank.redact.redaction import redact_text, warm_up
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


def test_corpus_has_both_sides_and_every_split() -> None:
    rows = load()
    assert len(rows) >= 2000
    for split in ("dev", "heldout", "heldout2"):
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


@pytest.mark.parametrize(
    ("split", "caught", "kept"), [("heldout", 0.92, 0.95), ("heldout2", 0.90, 0.98)]
)
def test_held_out_does_not_regress(result: dict, split: str, caught: float, kept: float) -> None:
    t = result["overall"][split]
    print(f"\n{split}: {t}")
    assert t["caught_share"] >= caught
    assert t["kept_share"] >= kept


@pytest.mark.xfail(strict=True, reason="held-out misses: see evals/sets/secrets/README.md")
@pytest.mark.parametrize("split", ["heldout", "heldout2"])
def test_held_out_meets_the_targets(result: dict, split: str) -> None:
    t = result["overall"][split]
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
        "passwordtoken" * 7_500,
        '<a b="c">x</a>' * 7_000,
        'key="password" value="' * 5_000,
        '"password", ' * 8_000,
        "a, " * 33_000 + '= "x", "y"',
        "passwords:\n" + "  - x\n" * 16_000,
        "mysql -u -p" * 9_000,
        "api_key = " * 10_000,
        "machine a login b password " * 3_600,
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
        "secret-words",
        "xml",
        "xml-key-value",
        "call-args",
        "tuple",
        "yaml-list",
        "mysql-flags",
        "gitleaks-generic",
        "netrc",
    ],
)
def test_100_kb_adversarial_input_stays_linear(text: str) -> None:
    """~100 KB on one line: each took 3-8 s before (quadratic regexes); now well under 1 s on
    a quiet machine. The bound is 3 s because CI shares two cores with other work."""
    warm_up()
    start = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - start < 3.0
