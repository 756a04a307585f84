"""Ingest redaction: every corpus secret goes, every look-alike stays, nothing leaks via findings.

Precision and recall are asserted over the labelled corpus (tests/unit/secrets_corpus.py), not
over a handful of hand-picked strings, so a tuning change that trades one for the other shows.
"""

from __future__ import annotations

import re
import time

import pytest
from detect_secrets.settings import get_settings

from factbank.redact.redaction import PLUGINS, Finding, redact_fields, redact_text
from tests.unit.secrets_corpus import NON_SECRETS, SECRETS, corpus_scores

_MARKER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")


def _case_id(case) -> str:
    return case.kind


@pytest.mark.parametrize("case", SECRETS, ids=_case_id)
def test_every_secret_is_redacted(case) -> None:
    out, findings = redact_text(case.text)
    assert case.value not in out
    assert findings, "a redaction without a finding would let a reject-policy bank store it"
    assert case.kind in {f.kind for f in findings}


@pytest.mark.parametrize("case", SECRETS, ids=_case_id)
def test_only_the_secret_is_redacted(case) -> None:
    """Putting the value back where the markers are restores the text exactly: names, hosts,
    ports and the surrounding sentence (Chinese included) are untouched."""
    out, _ = redact_text(case.text)
    assert _MARKER.sub(lambda _: case.value, out) == case.text


@pytest.mark.parametrize("text", NON_SECRETS)
def test_every_non_secret_is_untouched(text: str) -> None:
    assert redact_text(text) == (text, [])


def test_corpus_is_big_enough() -> None:
    assert len(SECRETS) >= 60
    assert len(NON_SECRETS) >= 60
    assert len({c.value for c in SECRETS}) == len(SECRETS)


def test_precision_and_recall_over_the_corpus() -> None:
    scores = corpus_scores()
    print(f"\nredaction corpus: {scores}")
    assert scores["recall"] >= 0.95
    assert scores["precision"] >= 0.95


def test_findings_never_carry_the_secret() -> None:
    for case in SECRETS:
        _, findings = redact_text(case.text, field="quote")
        assert all(isinstance(f, Finding) and f.field == "quote" for f in findings)
        assert case.value not in repr(findings)


def test_redaction_is_idempotent() -> None:
    for case in SECRETS:
        once, _ = redact_text(case.text)
        twice, findings = redact_text(once)
        assert (twice, findings) == (once, [])


def test_every_occurrence_is_replaced() -> None:
    key = SECRETS[0].value  # an AWS access key id
    out, findings = redact_text(f"{key} is in .env, and again {key} in the CI vars")
    assert key not in out
    assert out.count("[REDACTED:aws_access_key]") == 2
    assert len(findings) == 2


def test_assignment_keeps_the_name() -> None:
    out, findings = redact_text("DB_PASSWORD=Zq8xY2kV9mW4 and REDIS_TOKEN: 'tok-9f8e7d6c5b4a'")
    assert out == "DB_PASSWORD=[REDACTED:assignment] and REDIS_TOKEN: '[REDACTED:assignment]'"
    assert [f.kind for f in findings] == ["assignment", "assignment"]


def test_pem_block_is_removed_whole() -> None:
    case = next(c for c in SECRETS if c.kind == "private_key" and "Monday" in c.text)
    out, findings = redact_text(case.text)
    assert out == "Server key (do not share):\n[REDACTED:private_key]\nIt was rotated on Monday."
    assert [f.kind for f in findings] == ["private_key"]
    for line in case.value.splitlines()[1:-1]:
        assert line not in out


def test_redact_fields_handles_tags_per_item() -> None:
    token = next(c.value for c in SECRETS if c.kind == "github_token")
    fields = {
        "content": "CI publishes with the release bot token",
        "quote": f"GITHUB_TOKEN={token}",
        "source": "https://ci:" + "Pa55w0rd-ci" + "@ci.internal/job/42",
        "tags": ["ci", token, "发布"],
    }
    out, findings = redact_fields(fields)
    assert out["content"] == fields["content"]
    assert out["quote"] == "GITHUB_TOKEN=[REDACTED:github_token]"
    assert out["source"] == "https://ci:[REDACTED:url_password]@ci.internal/job/42"
    assert out["tags"] == ["ci", "[REDACTED:github_token]", "发布"]
    assert sorted((f.field, f.kind) for f in findings) == [
        ("quote", "github_token"),
        ("source", "url_password"),
        ("tags[1]", "github_token"),
    ]


def test_a_secret_named_in_one_field_is_removed_from_the_others() -> None:
    """The quote names the key; the content repeats it bare, where nothing marks it."""
    value = "Xr7" + "tQ2mLp9vK4sW"
    out, findings = redact_fields(
        {"content": f"the geocoder key {value} is shared", "quote": f"GEOCODER_API_KEY={value}"}
    )
    assert value not in out["content"] and value not in out["quote"]
    assert {f.field for f in findings} == {"content", "quote"}


def test_redact_fields_passes_other_values_through() -> None:
    out, findings = redact_fields({"content": "", "quote": None, "tags": []})
    assert out == {"content": "", "quote": None, "tags": []}
    assert findings == []


def test_uses_detect_secrets_plugins_without_touching_its_global_settings() -> None:
    before = get_settings().json()
    redact_text(" ".join(c.text for c in SECRETS[:10]))
    assert get_settings().json() == before
    for name in (
        "AWSKeyDetector",
        "GitHubTokenDetector",
        "JwtTokenDetector",
        "KeywordDetector",
        "PrivateKeyDetector",
        "Base64HighEntropyString",
    ):
        assert name in PLUGINS


def test_chinese_text_with_keys() -> None:
    out, findings = redact_text("生产库密码：Hq3vN8pX2rT6，备份在 /var/backups/pg 下。")
    assert out == "生产库密码：[REDACTED:assignment]，备份在 /var/backups/pg 下。"
    assert len(findings) == 1


@pytest.mark.parametrize(
    "text",
    [
        "a" * 20000,
        "password=" * 2000,
        "http://a:b" * 2000,
        "\n".join(f"token: abc{i}" for i in range(2000)),
        "-----BEGIN RSA PRIVATE KEY-----\n" * 300,
        "中文测试句子，" * 3000,
    ],
    ids=["letters", "assignments", "urls", "many-secrets", "pem-headers", "chinese"],
)
def test_no_quadratic_blowup_on_long_input(text: str) -> None:
    """A pasted log or blob must not stall ingest (regex backtracking, per-value rescans)."""
    start = time.perf_counter()
    redact_text(text)
    # A guard against catastrophic backtracking (seconds-to-hours), not a speed figure:
    # speed is reported by corpus_scores() and the ingest bench.
    assert time.perf_counter() - start < 20.0
