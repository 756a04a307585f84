"""Redaction by class: one or two written examples of each shape a secret (or a look-alike)
takes, so that a change that breaks a whole class fails here by name, whatever the fixture
corpora say. The classes are the shapes secrets leaked in (a key=value shape, a URL
credential, a header form, a context word in another language, placeholders, documentation
values...), and the layers that handle them are named in ``factbank.redact.redaction``'s
docstring. Secret-shaped values are generated from a fixed seed at import, as in
``secrets_corpus``, so no credential-shaped literal sits in the repository.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from factbank.redact import gitleaks_rules
from factbank.redact import redaction as r
from factbank.redact.redaction import redact_text
from factbank_evals.redaction_recall import load

_rng = random.Random(20261201)


def _key(n: int = 24, alphabet: str = string.ascii_letters + string.digits) -> str:
    while True:
        s = "".join(_rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s):
            return s


PW = "s3cr3t" + _key(6)  # a password-like value
KEY = _key(24)
B64 = _key(40, string.ascii_letters + string.digits + "+/")

# (class, text with {v}, value)
SECRETS = [
    ("xml element", "<password>{v}</password>", PW),
    ("xml key/value attributes", '<add key="DbPassword" value="{v}"/>', PW),
    ("xml name/value attributes", '<property name="password" value="{v}"/>', PW),
    ("xml keyed element", '<entry key="api.token">{v}</entry>', KEY),
    ("xml key/value siblings", "<entry>\n  <key>db.password</key>\n  <value>{v}</value>", PW),
    ("properties", "db.password={v}", PW),
    ("getenv default", 'os.getenv("DB_PASSWORD", "{v}")', PW),
    ("php define", "define('DB_PASSWORD', '{v}');", PW),
    ("php array", "'password' => '{v}',", PW),
    ("comparison", 'if password == "{v}":', PW),
    ("reverse comparison", 'if ("{v}" !== my_password) {{', PW),
    ("go short declaration", "password := {v}", PW),
    ("c array literal", 'char secret[25] = "{v}";', PW),
    ("c++ constructor", 'std::string secret("{v}");', PW),
    ("qualified name", 'password_prod_eu = "{v}"', KEY),
    ("several names at once", 'user, password = "admin", "{v}"', PW),
    ("dockerfile env", "ENV DB_PASSWORD {v}", PW),
    ("kubernetes env", "env:\n  - name: DB_PASSWORD\n    value: {v}", PW),
    ("json name/value", '{{"name": "API_TOKEN", "value": "{v}"}}', KEY),
    ("yaml list", "passwords:\n  - {v}\n  - other", PW),
    ("inline list", 'tokens = ["{v}"]', KEY),
    ("escaped json", 'body: "{{\\"token\\": \\"{v}\\"}}"', KEY),
    ("curl basic header", 'curl -H "Authorization: Basic {v}" https://x.io', B64),
    ("curl api key header", "curl -H 'X-Api-Key: {v}' https://x.io", KEY),
    ("curl user", "curl -u admin:{v} https://x.io", PW),
    ("curl proxy user", "curl --proxy-user admin:{v} https://x.io", PW),
    ("token header", "Authorization: Token {v}", KEY),
    ("ado connection string", "Server=db;User Id=sa;Password={v};", PW),
    ("jdbc query", "jdbc:mysql://host/db?user=u&password={v}", PW),
    ("url userinfo", "psql postgresql://app:{v}@db:5432/facts", PW),
    ("github token as url user", "git+https://{v}:x-oauth-basic@github.com/acme/x.git", KEY),
    ("mysql -p", "mysql -u root -p{v} -h db", PW),
    ("sshpass", "sshpass -p '{v}' ssh deploy@host", PW),
    ("redis-cli -a", "redis-cli -a {v} ping", PW),
    ("docker login -p", "docker login -u bot -p {v} registry.io", PW),
    ("cli flag", "--password {v}", PW),
    ("netrc", "machine api.example.org login bot password {v}", PW),
    ("user and password tuple", 'requests.get(url, auth=("admin", "{v}"))', PW),
    ("sql identified by", "CREATE USER app IDENTIFIED BY '{v}';", PW),
    ("sql with password", "ALTER ROLE app WITH PASSWORD '{v}';", PW),
    ("prose", "the password is {v}", PW),
    ("prose with colon", "the password for the admin user: {v}", PW),
    ("instruction", "set DB_PASSWORD to {v}", PW),
    ("german", "das Passwort ist {v}", PW),
    ("spanish", "la contraseña es {v}", PW),
    ("japanese", "パスワードは {v} です", PW),
    ("chinese", "数据库密码是 {v}，别外传。", PW),
    (
        "hex behind a key prefix",
        "mailgun key-{v}",
        "".join(_rng.choice("0123456789abcdef") for _ in range(32)),
    ),
    (
        "generic key without digits",
        "GITLAB_KEY: {v}",
        "".join(_rng.choice(string.ascii_letters) for _ in range(22)),
    ),
    ("unlabelled random string", "the upstream gave us {v} for callbacks", _key(40)),
]

LOOKALIKES = [
    ("xml template", "<password>${DB_PASSWORD}</password>"),
    ("xml empty", "<password></password>"),
    ("xml key naming a thing", '<item key="ConnectionString1">'),
    ("getenv without default", 'os.getenv("DB_PASSWORD", "")'),
    ("dockerfile env reference", "ENV DB_PASSWORD ${DB_PASSWORD}"),
    ("metadata names", "password_min_length: 12"),
    ("metadata names", "PASSWORD_RESET_URL=https://example.org/reset"),
    ("metadata names", "token_ttl: 3600"),
    ("empty comparison", 'if password == "":'),
    (
        "kubernetes secret ref",
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef: {name: db}",
    ),
    ("shell variables", 'curl -H "Authorization: Bearer $TOKEN" https://x.io'),
    ("shell variables", 'curl -u "$USER:$PASS" https://x.io'),
    ("empty connection string field", "Password=;"),
    ("slot", "Password=<password>;"),
    ("a secret's name", "secretName: db-credentials"),
    ("versions", 'api_version = "2023-10-01"'),
    ("aws example", "AKIAIOSFODNN7EXAMPLE"),
    ("slot", "token: <your-token-here>"),
    ("a variable's name", "api_key: YOUR_API_KEY"),
    ("format string", 'format_password = "prefix_{}".format(value)'),
    ("yaml tag", "MasterUserPassword: !Ref 'MasterUserPassword'"),
    ("explicitly fake", "DOCKER_TOKEN=not_a_real_token"),
    ("stock url password", "https://username:mypassword@test.com/endpoint"),
    ("short url password", "https://user:abc@api.com/v1"),
    ("default pair", "postgres://postgres:postgres@localhost:5432/app"),
    ("prose key, not a key", 'ACCESS_KEY: "Get this from the vault"'),
    ("label in a call", 't("api_key", "API key")'),
    ("prose with a list", "The password policy requires 12 characters."),
    ("sentence as a name", "The key is a UUID: 123e4567-e89b-12d3-a456-426614174000."),
    ("command substitution", "SUMO_ACCESS_KEY=`etcdctl get /sumologic_secret`"),
    ("punctuation only", 'password = ",.:-?!"'),
    ("jwt shape without json", "eyJAAAA.eyJBBB"),
    ("telegram shape inside an arn", "arn:aws:sns:eu:111122223333:" + "a" * 37),
    ("quoted url then @", '"https://url:8000";@something else'),
    ("snake_case after a provider prefix", "&hf_servingcellpriorityparametersdescription_h_prio"),
    ("mysql prompt", "mysql -u root -p db_name"),
    ("instruction, not a value", "Set the password to expire after 90 days"),
    (
        "engineering prose",
        "The Redis key format is fb:{bank_id}:q:{sha1(query)} with a TTL of 600 s.",
    ),
    ("engineering prose", "secretKeyRef: {name: factbank-db, key: password}"),
    ("engineering prose", "The key rotation job (keyrotate-7f9c) runs nightly at 02:00 UTC."),
    ("engineering prose", 'password_reset_url = f"{base_url}/reset/{token_id}"'),
    ("commit", "commit 9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d moved the pool size"),
    ("uuid", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
]


@pytest.mark.parametrize(("cls", "template", "value"), SECRETS, ids=[c for c, _, _ in SECRETS])
def test_secret_class(cls: str, template: str, value: str) -> None:
    text = template.format(v=value)
    out, findings = redact_text(text)
    assert value not in out, out
    assert findings


@pytest.mark.parametrize(("cls", "text"), LOOKALIKES, ids=[c for c, _ in LOOKALIKES])
def test_lookalike_class(cls: str, text: str) -> None:
    assert redact_text(text) == (text, [])


# --- gitleaks' rules as data ---------------------------------------------------------------


def test_the_gitleaks_rules_file_names_its_source_and_parses() -> None:
    text = gitleaks_rules.path().read_text(encoding="utf-8")
    assert re.search(r"config/gitleaks\.toml at commit [0-9a-f]{40}", text)
    assert "Licence: MIT" in text
    rules = gitleaks_rules._rules()
    assert gitleaks_rules.PREFIX + "generic-api-key" in rules
    generic = rules[gitleaks_rules.PREFIX + "generic-api-key"]
    assert generic.entropy == 3.5 and len(generic.allowlists) >= 3
    assert sum(len(a.stopwords) for a in generic.allowlists) > 1000


def test_gitleaks_filters_apply_as_gitleaks_does() -> None:
    rid = gitleaks_rules.PREFIX + "generic-api-key"
    value = _key(20)
    text = f"export SERVICE_TOKEN={value}"
    s = text.index(value)
    assert gitleaks_rules.kept(rid, text, s, s + len(value))
    low = "abababababab"  # entropy 1.0 <= 3.5
    t2 = f"export SERVICE_TOKEN={low}"
    assert not gitleaks_rules.kept(rid, t2, t2.index(low), len(t2))
    # a stopword inside the secret ("admin"), a regexTarget=match allowlist (``api_version``)
    t3 = "export SERVICE_TOKEN=admin" + value
    assert not gitleaks_rules.kept(rid, t3, t3.index("admin"), len(t3))
    t4 = "api_version: " + value
    assert not gitleaks_rules.kept(rid, t4, t4.index(value), len(t4))
    # a match that spans lines (``NAME=\nNAME=``) is allowlisted as a whole
    t5 = "GITHUB_API_KEY=\nDYNATRACE_API_KEY="
    assert not gitleaks_rules.kept(rid, t5, t5.index("DYNATRACE"), len(t5))
    assert gitleaks_rules.kept("betterleaks.github-pat", text, 0, 4)  # not ours: kept


# --- the literal prefilter never skips a pattern that would match -----------------------------


def test_a_pattern_is_only_skipped_when_it_cannot_match() -> None:
    tables = r._plugin_table() + r._extra_table()
    texts = [row["text"] for row in load()] + ["ci", "moved to the new runbook", "部署前先跑迁移"]
    skipped = 0
    for text in texts:
        runnable = {id(p) for p, _, _ in r._runnable(text, tables)}
        for pattern, *_ in tables:
            if id(pattern) not in runnable:
                skipped += 1
                assert not pattern.search(text), (pattern.pattern, text[:120])
    assert skipped > len(texts) * len(tables) // 2  # the prefilter does skip most
