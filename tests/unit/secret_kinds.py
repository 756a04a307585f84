"""Secrets of many kinds, as they would appear in a task, a log line or a fact: one value per
kind, generated (seeded) in each provider's shape, never a live credential. Shared by the
tests that follow secrets through the client (dispatch's run files, the dashboard) and the
server (prose introductions). `KINDS`: kind -> (text holding the secret, the secret)."""

from __future__ import annotations

import base64
import json
import random
import string

_rng = random.Random(21)


def _r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _jwt() -> str:
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = base64.urlsafe_b64encode(json.dumps({"sub": _r(8), "iat": 1700000000}).encode())
    return f"{head.decode().rstrip('=')}.{body.decode().rstrip('=')}.{_r(43)}"


_HEX = "0123456789abcdef"
_PEM_BODY = "\n".join(_r(64, string.ascii_letters + string.digits + "+/") for _ in range(4))
_VALUES = {
    "aws_access_key": "AKIA" + _r(16, string.ascii_uppercase + string.digits),
    "aws_secret": _r(40, string.ascii_letters + string.digits + "/+"),
    "github_token": "ghp_" + _r(36),
    "gitlab_token": "glpat-" + _r(20),
    "slack_token": "xoxb-" + _r(11, string.digits) + "-" + _r(12, string.digits) + "-" + _r(24),
    "openai_key": "sk-proj-" + _r(48),
    "anthropic_key": "sk-ant-api03-" + _r(80) + "-" + _r(6) + "AA",
    "stripe_key": "sk_live_" + _r(24),
    "google_api_key": "AIza" + _r(35),
    "jwt": _jwt(),
    "npm_token": "npm_" + _r(36),
    "huggingface_token": "hf_" + _r(34, string.ascii_letters),
    "sendgrid_key": "SG." + _r(22) + "." + _r(43),
    "factbank_token": "fb_" + _r(40),
    "url_password": _r(14) + "!x9",
    "password_prose": "Xy7!pQ2z" + _r(6),
    "password_bare": "Qw3#" + _r(10),
    "chinese_password": "Mn5$" + _r(10),
    "bearer": _r(40),
    "private_key": _PEM_BODY,
    "generic_hex_secret": _r(40, _HEX),
}
KINDS: dict[str, tuple[str, str]] = {
    "aws_access_key": (f"AWS_ACCESS_KEY_ID={_VALUES['aws_access_key']}", ""),
    "aws_secret": (f"aws_secret_access_key = {_VALUES['aws_secret']}", ""),
    "github_token": (f"push with {_VALUES['github_token']}", ""),
    "gitlab_token": (f"GITLAB_TOKEN={_VALUES['gitlab_token']}", ""),
    "slack_token": (f"the bot posts with {_VALUES['slack_token']}", ""),
    "openai_key": (f"OPENAI_API_KEY={_VALUES['openai_key']}", ""),
    "anthropic_key": (f"export ANTHROPIC_API_KEY={_VALUES['anthropic_key']}", ""),
    "stripe_key": (f"stripe key {_VALUES['stripe_key']}", ""),
    "google_api_key": (f"maps key {_VALUES['google_api_key']}", ""),
    "jwt": (f"curl -H 'X-Auth: {_VALUES['jwt']}'", ""),
    "npm_token": (f"//registry.npmjs.org/:_authToken={_VALUES['npm_token']}", ""),
    "huggingface_token": (f"HF_TOKEN={_VALUES['huggingface_token']}", ""),
    "sendgrid_key": (f"mail via {_VALUES['sendgrid_key']}", ""),
    "factbank_token": (f"FACTBANK_TOKEN={_VALUES['factbank_token']}", ""),
    "url_password": (f"postgres://deploy:{_VALUES['url_password']}@db.internal:5432/app", ""),
    "password_prose": (f"the admin password is {_VALUES['password_prose']}", ""),
    "password_bare": (f"what is the backup password {_VALUES['password_bare']}?", ""),
    "chinese_password": (f"数据库密码是 {_VALUES['chinese_password']}", ""),
    "bearer": (f"Authorization: Bearer {_VALUES['bearer']}", ""),
    "private_key": ("-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY
                    + "\n-----END RSA PRIVATE KEY-----", ""),
    "generic_hex_secret": (f"API_SECRET={_VALUES['generic_hex_secret']}", ""),
}
KINDS = {k: (text, _VALUES[k]) for k, (text, _) in KINDS.items()}
