"""Secrets written as prose, and base64 of prose.

A9: "what is the backup password Xy7!pQ2zLm9wQ?" was stored verbatim in `questions` while
`password = Xy7!pQ2zLm9wQ` was caught: a secret word followed by "is", "是", ":", "=" or
nothing, in English and Chinese, is redacted in every field; the look-alikes (a policy, a
token bucket, a key rotation) are kept. The scanner corpora's figures did not move
(`python -m factbank_evals.redaction_recall`: caught 0.951, kept 0.970 before and after).

A10: base64 of plain text is not a secret (decoded and checked first); base64 of a secret, or
of random bytes, still is.
"""

from __future__ import annotations

import base64

import pytest

from factbank.redact.redaction import redact_fields, redact_text

VALUES = ("Xy7!pQ2zLm9wQ", "Tr0ub4dor&3xQ", "Zk8pQ2wLm9xR4tY7", "AbC9dEf2GhI4jKl6MnO8",
          "9fJ2!kLp0QzX", "Hunter2!xyz")
SECRET = [
    "what is the backup password Xy7!pQ2zLm9wQ?",
    "the backup password: Xy7!pQ2zLm9wQ",
    "The password is Xy7!pQ2zLm9wQ.",
    "the staging db password = Xy7!pQ2zLm9wQ",
    "passphrase Tr0ub4dor&3xQ for the vault",
    "use token Zk8pQ2wLm9xR4tY7 for staging",
    "the secret 9fJ2!kLp0QzX is rotated monthly",
    "our API key AbC9dEf2GhI4jKl6MnO8 is in 1Password",
    "api key: AbC9dEf2GhI4jKl6MnO8",
    "what's the admin password? it's Hunter2!xyz",
    "备份密码 Xy7!pQ2zLm9wQ",
    "备份的密码是 Xy7!pQ2zLm9wQ",
    "口令：Xy7!pQ2zLm9wQ",
    "口令 Xy7!pQ2zLm9wQ",
    "密钥 AbC9dEf2GhI4jKl6MnO8",
    "密钥是AbC9dEf2GhI4jKl6MnO8",
    "数据库密码为Xy7!pQ2zLm9wQ，请勿外传",
    "令牌是 Zk8pQ2wLm9xR4tY7",
]
KEEP = [
    "the password policy is documented in SECURITY.md",
    "token bucket rate limit is 100/s",
    "the password reset flow sends an email",
    "API key rotation happens every 90 days",
    "the secret manager is Vault",
    "token expiry is 3600 seconds",
    "password hashing uses argon2id",
    "the password field must be at least 12 characters",
    "set the token TTL to 15m",
    "secret scanning runs in CI via gitleaks v8.18.2",
    "the API key header is X-Api-Key",
    "store the password in ${DB_PASSWORD}",
    "password length minimum is 12",
    "the token is expired",
    "rotate the secret with vault kv put secret/app",
    "access key IDs start with AKIA",
    "the token model gpt-4o-mini-2024-07-18 counts differently",
    "passphrase-protected SSH keys need ssh-agent",
    "密码策略写在 SECURITY.md 里",
    "令牌桶限流是每秒 100 次",
    "密钥轮换每 90 天一次",
]
FIELDS = ("content", "quote", "questions", "tags", "location")


def _fields(field: str, text: str) -> dict:
    base = {"content": "c", "quote": "q", "questions": ["q?"], "tags": ["t"], "location": "l"}
    return {**base, field: [text] if isinstance(base[field], list) else text}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("text", SECRET)
def test_a_secret_introduced_in_prose_is_redacted_in_every_field(text, field):
    out, findings = redact_fields(_fields(field, text))
    flat = repr(out)
    assert not any(v in flat for v in VALUES), flat
    assert findings and "[REDACTED:" in flat


@pytest.mark.parametrize("text", KEEP)
def test_prose_about_secrets_is_kept(text):
    assert redact_text(text) == (text, [])


@pytest.mark.parametrize("text", [
    "The deploy runs every night at two and then posts to the channel",
    "运行部署脚本之前先备份数据库，然后再迁移",
    "Remember to rotate the certificates before the end of the month",
])
def test_base64_of_plain_text_is_kept(text):
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        note = f"the config holds {encode(text.encode()).decode()} as a greeting"
        assert redact_text(note) == (note, [])


@pytest.mark.parametrize("text", [
    "the backup password is Xy7!pQ2zLm9wQ and nothing else here",
    "kR9xPq2Lm8vT4wZs7yB3nC6dQ1",
])
def test_base64_of_a_secret_or_of_random_bytes_is_still_redacted(text):
    raw = text.encode() if " " in text else base64.b64decode(text + "==", validate=False)
    encoded = base64.b64encode(raw).decode()
    out, findings = redact_text(f"value {encoded} end")
    assert encoded not in out and findings
