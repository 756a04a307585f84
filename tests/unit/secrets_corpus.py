"""A labelled corpus for the ingest redactor: fact-like sentences holding secrets, and look-alikes
that must survive.

The secret values are generated at import from a fixed seed, with the real prefixes and shapes
of each provider but random bodies. They are not credentials, and building them at runtime
keeps secret-shaped literals out of the repository, so our own scanners and a host's push
protection have nothing to trip on.

``SECRETS`` holds ``Case(text, kind, value)``: ``kind`` is the kind we expect to be reported
(merged overlaps report the most specific one), ``value`` the substring that must not survive.
``NON_SECRETS`` holds texts that must come back byte-for-byte unchanged.
``corpus_scores()`` reports precision and recall over both lists.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from typing import NamedTuple

from factbank.redact.redaction import redact_text

_rng = random.Random(20240601)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"
_HEXL = "0123456789abcdef"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    """Random body; retried until it has a digit and a letter, as real keys almost always do."""
    while True:
        s = "".join(_rng.choice(alphabet) for _ in range(n))
        mixed_alphabet = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
        if n < 8 or not mixed_alphabet or (
            any(c.isdigit() for c in s) and any(c.isalpha() for c in s)
        ):
            return s


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": f"agent-{_r(6, string.digits)}", "bank": "team", "iat": 1717200000}
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{_r(43, _URLSAFE)}"


def _pem_body(lines: int, width: int = 64) -> list[str]:
    return [_r(width, _B64) for _ in range(lines)] + [_r(24, _B64) + "=="]


def _pem(label: str, lines: int = 6) -> str:
    body = "\n".join(_pem_body(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


class Case(NamedTuple):
    text: str
    kind: str
    value: str


def _secrets() -> list[Case]:
    out: list[Case] = []

    def add(template: str, kind: str, value: str) -> None:
        out.append(Case(template.replace("{v}", value), kind, value))

    aws_id = "AKIA" + _r(16, _UPPER_DIGITS)
    add("The CI user's access key id is {v}, scoped to the backups bucket.", "aws_access_key",
        aws_id)
    add("deploy uses AWS_SECRET_ACCESS_KEY={v} from the runner env", "assignment", _r(40, _B64))
    add("In ~/.aws/credentials: aws_secret_access_key = {v}", "assignment", _r(40, _B64))
    add("boto3 was configured with aws_secret_access_key=\"{v}\" in the notebook", "aws_access_key",
        _r(40, _B64))
    add("Temporary STS creds start with {v} and expire after an hour.", "aws_access_key",
        "ASIA" + _r(16, _UPPER_DIGITS))
    add("token {v} is the release bot's classic PAT", "github_token", "ghp_" + _r(36))
    add("gh auth status showed an OAuth token {v} for the CI app", "github_token", "gho_" + _r(36))
    add("The fine-grained PAT is {v}; it only has contents:read.", "github_token",
        "github_pat_" + _r(22) + "_" + _r(59))
    add("GitLab runner registration used {v} (expires in June).", "gitlab_token",
        "glpat-" + _r(20, _URLSAFE))
    add("slack notifier: SLACK_BOT_TOKEN={v}", "slack_token",
        f"xoxb-{_r(12, string.digits)}-{_r(13, string.digits)}-{_r(24, string.ascii_lowercase)}")
    add("Alerts post to {v} (channel #ops).", "slack_token",
        f"https://hooks.slack.com/services/T{_r(8, _UPPER_DIGITS)}/B{_r(10, _UPPER_DIGITS)}/"
        f"{_r(24)}")
    add("The user token {v} belongs to the ops admin.", "slack_token",
        f"xoxp-{_r(11, string.digits)}-{_r(11, string.digits)}-{_r(12, string.digits)}-"
        f"{_r(32, _HEXL)}")
    add("~/.npmrc has //registry.npmjs.org/:_authToken={v}", "npm_token", "npm_" + _r(36))
    add("We publish with the automation token {v} from 1Password.", "npm_token", "npm_" + _r(36))
    add("twine upload uses the project token {v}", "pypi_token",
        "pypi-AgEIcHlwaS5vcmc" + _r(80, _URLSAFE))
    add("The staging session cookie was {v} when the bug reproduced.", "jwt", _jwt())
    add("curl -H 'Authorization: Bearer {v}' https://api.internal/facts", "jwt", _jwt())
    add("Server key (do not share):\n{v}\nIt was rotated on Monday.", "private_key",
        _pem("RSA PRIVATE KEY"))
    add("The deploy key on bastion is\n{v}", "private_key", _pem("OPENSSH PRIVATE KEY", 8))
    add("TLS for the ingest service:\n  tls.key: |\n{v}", "private_key",
        _pem("EC PRIVATE KEY", 3).replace("\n", "\n    "))
    add("A PKCS#8 key pasted in one line: {v} — that is the signing key.", "private_key",
        _pem("PRIVATE KEY", 4).replace("\n", " "))
    encrypted = (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        f"DEK-Info: AES-128-CBC,{_r(32, _HEXL).upper()}\n\n"
        + "\n".join(_pem_body(4))
        + "\n-----END RSA PRIVATE KEY-----"
    )
    add("legacy encrypted key from the old VPN box:\n{v}", "private_key", encrypted)
    escaped_body = "\\n".join(_pem_body(5))
    gcp_key = f"-----BEGIN PRIVATE KEY-----\\n{escaped_body}\\n-----END PRIVATE KEY-----"
    add('sa.json: {"type": "service_account", "project_id": "factbank-prod", '
        '"private_key": "{v}\\n", "client_email": "ingest@factbank-prod.iam.gserviceaccount.com"}',
        "gcp_private_key", gcp_key)
    add("Truncated quote of the key: {v}", "private_key",
        "-----BEGIN PRIVATE KEY-----\n" + "\n".join(_pem_body(3)))
    add("Claude Code ran with ANTHROPIC_API_KEY={v}", "anthropic_key",
        "sk-ant-api03-" + _r(93, _URLSAFE) + "AA")
    add("the admin key {v} can create workspaces", "anthropic_key",
        "sk-ant-admin01-" + _r(93, _URLSAFE) + "AA")
    add("OpenAI project key: {v}", "openai_key",
        "sk-proj-" + _r(48, _URLSAFE) + "T3BlbkFJ" + _r(48))
    add("The eval harness uses service account key {v}.", "openai_key",
        "sk-svcacct-" + _r(64, _URLSAFE))
    add("old OPENAI key {v} still works for embeddings", "openai_key",
        "sk-" + _r(20) + "T3BlbkFJ" + _r(20))
    add("the app connects with postgres://app:{v}@db:5432/app", "url_password", "hunter2")
    add("cache is redis://:{v}@redis:6379/0 on the compose network", "url_password", _r(24))
    add("MySQL DSN mysql://root:{v}@10.0.0.12:3306/factbank", "url_password",
        "p@ss" + _r(8) + "!x")
    add("Atlas: mongodb+srv://ingest:{v}@cluster0.ab1cd.mongodb.net/facts", "url_password",
        _r(16))
    add("RabbitMQ broker amqp://factbank:{v}@rabbit:5672/%2F", "url_password", _r(20))
    add("ADO string: Server=tcp:sql.acme.net,1433;Database=facts;User ID=sa;Password={v};",
        "assignment", "Str0ng!" + _r(10))
    add("JDBC: jdbc:postgresql://db:5432/app?user=app&password={v}&ssl=true", "assignment",
        _r(14))
    add("In .env: DB_PASSWORD={v}", "assignment", _r(18))
    add("PGPASSWORD={v} pg_dump -h db -U app app > backup.sql", "assignment", _r(16))
    add('compose.yaml sets REDIS_PASSWORD: "{v}" for the cache', "assignment", _r(22))
    add('config.json: {"user": "ingest", "password": "{v}", "port": 5432}', "assignment",
        "Tr0ub4dor&" + _r(6))
    add('settings.py has api_key = "{v}" for the geocoder', "assignment", _r(32))
    add("SECRET_KEY={v}", "assignment", "django-insecure-" + _r(40, _ALNUM + "!@#%^*-_"))
    add("JWT_SECRET={v} signs the session tokens", "assignment", _r(48))
    add("oauth:\n  client_id: factbank-web\n  client_secret: {v}\n", "assignment", _r(40))
    add("run it as factbank-admin --password {v} --bank team", "assignment", "q" + _r(12))
    add("Maps key AIza is the prefix; ours is {v}", "google_api_key", "AIza" + _r(35, _URLSAFE))
    add("Blob storage: DefaultEndpointsProtocol=https;AccountName=factbank;AccountKey={v};"
        "EndpointSuffix=core.windows.net", "azure_storage_key", _r(86, _B64) + "==")
    add("SendGrid mail relay key {v}", "sendgrid_key",
        f"SG.{_r(22, _URLSAFE)}.{_r(43, _URLSAFE)}")
    add("Twilio API key sid {v} is used by the pager", "twilio_key",
        "SK" + _r(32, string.ascii_lowercase + string.digits))
    add("billing uses STRIPE_SECRET={v}", "stripe_key", "sk_live_" + _r(24))
    add("tests call Stripe with restricted key {v}", "stripe_key", "rk_test_" + _r(24))
    add("The Discord bot logs in with {v}", "discord_token",
        f"M{_r(25, _URLSAFE)}.{_r(6, _URLSAFE)}.{_r(27, _URLSAFE)}")
    add("telegram notifier bot {v} posts to the ops group", "telegram_token",
        f"{_r(9, string.digits)}:AA{_r(33, _URLSAFE)}")
    add("Newsletter sync uses {v}", "mailchimp_key",
        f"{_r(32, string.ascii_lowercase + string.digits)}-us14")
    add("HF_TOKEN is {v} for the private embedder repo", "huggingface_token", "hf_" + _r(34))
    add("Square checkout secret {v}", "square_oauth", "sq0csp-" + _r(43, _URLSAFE))
    add("生产环境数据库密码是 {v}，不要外传。", "assignment", _r(12))
    add("部署用的 GitHub 令牌：{v}，只给 CI 用。", "github_token", "ghp_" + _r(36))
    add("阿里云 AccessKey Secret 为 {v}，在 Vault 里也有一份。", "assignment", _r(30))
    add("测试账号的访问密钥 {v} 只有只读权限。", "aws_access_key", "AKIA" + _r(16, _UPPER_DIGITS))
    add("Claude 的 API key 是 {v}，每月额度 100 美元。", "anthropic_key",
        "sk-ant-api03-" + _r(93, _URLSAFE) + "AA")
    add("Redis 连接串 redis://default:{v}@cache.internal:6379 在 compose 里。", "url_password",
        _r(20))
    add("the Datadog API key is {v}", "assignment", _r(32, _HEXL))
    add("webhook signing secret for the ingest hook: {v}", "assignment", "whsec_" + _r(32))
    add("Set the HMAC for the recall webhook to {v} on both hosts.", "high_entropy", _r(44))
    add("The upstream gave us {v} as the shared secret for callbacks.", "high_entropy",
        _r(40, _URLSAFE))
    add("curl -H 'Authorization: Bearer {v}' http://recall:8001/recall", "bearer_token",
        "fb_" + _r(40))
    add("Registry pull uses Authorization: Basic {v}", "bearer_token",
        base64.b64encode(b"deploy:S3cr3t-" + _r(8).encode()).decode())
    twice = "ghp_" + _r(36)
    out.append(Case(f"GITHUB_TOKEN={twice}; the same {twice} is in the runner env", "github_token",
                    twice))
    add("X-Api-Key: {v}", "assignment", _r(40))
    add("encryption at rest: ENCRYPTION_KEY={v}", "assignment",
        base64.b64encode(_rng.randbytes(32)).decode())
    add("password: {v}", "assignment", "correct-horse-" + _r(6))
    add("the office wifi password is '{v}'", "assignment", "correct horse battery staple")
    add("Jenkins API: curl -u admin:{v} https://jenkins.internal/api/json", "url_password",
        "Jx" + _r(10))
    add("vault login {v} (root token, revoke after setup)", "vault_token",
        "hvs." + _r(90, _URLSAFE))
    add("doctl auth init with {v}", "digitalocean_token", "dop_v1_" + _r(64, _HEXL))
    add("路由器管理密码是 {v}，别告诉别人。", "assignment", _r(8, string.digits))
    add("kubectl create secret generic db --from-literal=password={v}", "assignment",
        "S3cr3t!" + _r(6))
    add("地图服务的 API 密钥：{v}", "assignment", _r(32))
    add("deploy alerts go to https://discord.com/api/webhooks/{v}", "discord_webhook",
        f"{_r(18, string.digits)}/{_r(68, _URLSAFE)}")
    # Families an outside probe saw leak; the kinds starting kf_ come from
    # Kingfisher's provider rules.
    add("The staging Azure client secret is {v}; it expires in June.", "azure_ad_client_secret",
        _r(3) + "8Q~" + _r(34, _ALNUM + "_~.-"))
    add("Bedrock calls use {v} from the ops vault", "kf_aws_amazon_bedrock_api_key_long_lived",
        "ABSKQmVkcm9ja0FQSUtleS1" + _r(108) + "=")
    add("Code search: SRC_ACCESS_TOKEN {v}", "kf_sourcegraph_access_token",
        f"sgp_{_r(16, _HEXL)}_{_r(40, _HEXL)}")
    add("The 42 intra app secret: {v}", "assignment", "s-s4t2ud-" + _r(64, _HEXL))
    add('curl -H "Authorization: Token {v}" https://api.internal/v1/me', "kf_curl_auth_header",
        _r(40, _HEXL))
    add('curl -H "apikey: {v}" https://api.internal/v1/me', "assignment", _r(32))
    add("curl --user deploy:{v} https://nexus.internal/service/rest", "url_password", _r(14))
    return out


NON_SECRETS: list[str] = [
    "fixed in commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 by reverting the pool size",
    "commit abc1234 broke the jieba dictionary path",
    "git checkout 9fceb02 && make test",
    "reverted a1b2c3d4e5f6 because it doubled latency",
    "git bisect pointed at e83c5163316f89bfbde7d9ab23ca2e25604af290",
    "bank id 123e4567-e89b-12d3-a456-426614174000 is the team bank",
    "fact 6F9619FF-8B86-D011-B42D-00C04FC964FF was superseded",
    "request_id=0b7e2c4a-9f1d-4e3b-8a6c-5d2f1e0a9b8c in the ingest log",
    "see /usr/local/lib/python3.11/site-packages/detect_secrets/plugins/keyword.py",
    "the bug is in services/factbank/redaction.py:142",
    r"pnpm store lives in C:\Users\dev\AppData\Local\pnpm\store\v3",
    "config is read from ~/.config/factbank/config.toml",
    "we pin litestar 2.12.1 and uvicorn 0.30.6",
    "release v1.2.3-rc.1+build.20240501 was tagged by CI",
    "the container runs Python 3.11.9",
    "API on port 8080, metrics on 9090",
    "recall talks to db:5432 over the compose network",
    "REDIS_URL=redis://redis:6379/0",
    "DATABASE_URL=postgres://app@db:5432/app uses peer auth",
    "https://github.com/Yelp/detect-secrets/blob/master/detect_secrets/plugins/keyword.py#L120",
    "pinned from https://pypi.org/project/detect-secrets/1.5.0/",
    "GET http://localhost:8000/api/v1/facts?limit=20&bank=team returns JSON",
    "Spring's AbstractSingletonProxyFactoryBean is the classic example",
    "HttpRequestInterceptorChainBuilder wraps the retry logic",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "image pinned as pgvector/pgvector@sha256:"
    "7d3b2d9c0f5e1a4b6c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    '"integrity": "sha512-'
    'Qm9yTW1nQ2xvdWRzQW5kUmFpbjEyMzQ1Njc4OTBhYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3OA=="',
    "checksum: 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "the app reads PASSWORD=${DB_PASSWORD} from the environment",
    "password: <redacted>",
    "DB_PASSWORD=$DB_PASSWORD is passed through by compose",
    'api_key: "{{ vault_api_key }}"',
    "token=<your-token> goes in the header",
    'SECRET_KEY = os.environ["SECRET_KEY"]',
    "password = settings.DB_PASSWORD",
    "api_key=OPENAI_API_KEY is read by the client",
    "PASSWORD_MIN_LENGTH=12",
    "TOKEN_URL=https://auth.example.com/oauth/token",
    "secretName: db-credentials",
    "max_tokens=4096 for the summariser",
    "我们用 pnpm 管理依赖，不要用 npm。",
    "数据库端口是 5432，主机是 db.internal。",
    "密码存在 1Password 的团队保险库里，不要写进代码。",
    "提交 3f2a9c1 修复了 jieba 分词的问题。",
    "召回服务使用多语言向量模型，中文查询也能找到英文事实。",
    "order id 01HZX3K6Q8V9T2M4N5P7R8S9TB is a ULID",
    "pod api-7d9f8b6c5d-x2x4z crashed with OOMKilled",
    "container 4f66ad9a0b2e exited with code 137",
    "backup finished at 2024-05-01T12:34:56.789Z",
    "the Tailscale address is 100.101.102.103:8443",
    "reach it at factbank.tail1234.ts.net:8443",
    "mail ops@example.com when the backup fails",
    "remote is git@github.com:acme/factbank.git",
    "detect-secrets>=1.5,<2 in the server extra",
    "the password is stored in Vault under secret/data/factbank/db",
    "rotate the token every 90 days",
    "the key is to run migrations before starting uvicorn",
    "token budget: 1500 tokens at session start",
    "use AWS_REGION=us-east-1 for the backups bucket",
    "CACHE_KEY=user:42:facts",
    "sort_key=created_at",
    "pytest -k test_redaction --maxfail=1",
    "pip install detect-secrets==1.5.0",
    "node_modules/.pnpm/@types+node@20.11.30/node_modules/@types/node",
    "test_redaction_keeps_git_shas_and_uuids_intact passes",
    "embedder is sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
    "Cache-Control: max-age=31536000, immutable",
    "the brand colour is #1f2937",
    "instance i-0abcd1234ef567890 runs the recall service",
    "role arn:aws:iam::123456789012:role/factbank-deploy",
    "dumps go to s3://acme-backups/factbank/2024-05-01/pg_dump.sql.gz",
    'export PATH="$HOME/.local/bin:$PATH"',
    "image ghcr.io/acme/factbank-ingest:0.3.1",
    "token: the deploy token lives in 1Password",
    "Authorization: Bearer ${FACTBANK_TOKEN}",
    "postgres://user:password@localhost:5432/dbname is the docs example",
    "the GPG key fingerprint is 4AEE18F83AFDEB23",
    "already redacted: GITHUB_TOKEN=[REDACTED:github_token]",
    "base64 of 'hello world' is aGVsbG8gd29ybGQ=",
    "MongoDB ObjectId 507f1f77bcf86cd799439011 is the fact's legacy id",
    "the hook should exit 0 within 200 ms",
    "PWD=/home/dev/factbank when the hook runs",
    "add ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx3bWQyZ0xkZnZ2dW9kbm5lYnZ5cWVkYnhvaGZ1cGc "
    "ops@laptop to authorized_keys",
    "The JWT header is eyJhbGciOiJIUzI1NiJ9 for HS256",
    "secret_key_base is generated by rails credentials:edit",
    "spec: https://docs.google.com/document/d/1aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdEFG/edit",
    "the token is expired, run factbank login",
    "这个接口的令牌有效期是 30 天",
    "密钥长度是 2048 位，令牌为空时返回 401。",
    "PASSWORD= (empty) disables auth in dev",
    "export FACTBANK_TOKEN=$(factbank token show)",
    "cert fingerprint SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8",
    "Use token bucket rate limiting with burst 20",
    "secretKeyRef: {name: db, key: password}",
    "X-Request-Id: 7f9c2ba4e88f827d616045507605853e",
    # documentation examples, masks and slots
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE is the docs example",
    "curl -u <user:password> https://test.com/endpoint",
    "curl -H 'Authorization: Bearer XXXXXXXXXXXX' https://example.com/micropub",
    "export OP_SERVICE_ACCOUNT_TOKEN=ops_eyJzaWduSW5BZGRyZXNzIjoiaHR0cHM6...",
    "client_secret: abc8Q~xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "Authorization: Basic [Redacted]",
    'curl -sL --user "$1:$2" "$3" > "$4"',
]

SECRETS: list[Case] = _secrets()


def corpus_scores() -> dict[str, float | int]:
    """Precision and recall of ``redact_text`` over the corpus, plus the scan speed.

    A secret counts as caught when its value no longer appears in the output. Precision is
    redactions that hit a secret over all redactions; any redaction in a NON_SECRETS text is a
    false positive."""
    caught = 0
    true_redactions = 0
    false_redactions = 0
    for case in SECRETS:
        out, findings = redact_text(case.text)
        hits = min(len(findings), case.text.count(case.value))
        if case.value not in out and findings:
            caught += 1
            true_redactions += hits
            false_redactions += len(findings) - hits
        else:
            false_redactions += len(findings)
    for text in NON_SECRETS:
        _, findings = redact_text(text)
        false_redactions += len(findings)
    total = true_redactions + false_redactions
    sample = " ".join(c.text for c in SECRETS[:8])[:500]
    start = time.perf_counter()
    for _ in range(20):
        redact_text(sample)
    ms = (time.perf_counter() - start) / 20 * 1000
    return {
        "secrets": len(SECRETS),
        "non_secrets": len(NON_SECRETS),
        "recall": caught / len(SECRETS),
        "precision": true_redactions / total if total else 1.0,
        "false_positives": false_redactions,
        "missed": len(SECRETS) - caught,
        "ms_per_500_chars": round(ms, 2),
    }
