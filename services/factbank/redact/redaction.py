"""Secret redaction at ingest (docs/principles.md#secrets-never-land: secrets never land).

Every text a fact carries (content, quote, source location, tags) passes through here *before*
it is stored, embedded, cached or logged. A secret that reached the bank would be injected into
every agent prompt that recalls the fact, so this module errs towards finding secrets, while
keeping the things engineering facts are made of (commit SHAs, UUIDs, paths, versions, ports,
hosts, URLs, digests, Chinese prose) intact, because a memory with its identifiers scrubbed is
useless.

Detection is layered:

1. detect-secrets (Yelp, maintained) plugins, used in-process. For the regex plugins we run
   their own compiled ``denylist`` patterns with ``finditer`` so we know *where* each secret is
   (detect-secrets only reports values, and sometimes only a prefix such as ``ghp``); each is
   skipped when a literal it cannot match without (``AKIA``, ``eyJ``) is absent. Its
   ``KeywordDetector`` regexes run for every language it knows (quoted literals in Python, JS,
   Java, Go ``:=``, C/Objective-C ``[25] = @"..."``, C++ ``secret("...")``, comparisons
   ``"v" == password``) with detect-secrets' own heuristic filters; a name that merely
   *contains* a secret word (``password_super_secure``) takes only key-shaped values, and one
   that says something about a secret (``password_hash``, ``token_url``) none. The
   high-entropy plugins supply the Shannon entropy maths. We do not go through
   ``scan_line``/``transient_settings``: that mutates process-global settings on every call (not
   safe under concurrent requests) and costs ~4 ms of cache busting per call.
2. What detect-secrets misses: Anthropic keys, new OpenAI keys (``sk-proj-``/``sk-svcacct-``/
   ``sk-admin-``), fine-grained GitHub PATs, ``npm_`` tokens, Slack app tokens, Hugging Face,
   Vault, DigitalOcean and friends, Stripe test keys, Google API keys, Discord webhook URLs,
   whole PEM private-key blocks (BEGIN..END, multi-line or ``\\n``-escaped inside JSON, e.g. a
   GCP service-account ``private_key``), passwords in URLs, connection strings and CLI flags
   (``redis://:pw@host``, ADO ``Password=...;``, ``curl -u user:pw``), named assignments
   (``*_KEY=``, ``*_SECRET=``, ``*_TOKEN=``, ``PASSWORD=`` in env/yaml/json/CLI style, plus "the
   password is ..." and Chinese "密码是 ...") where only the value is redacted, bearer tokens,
   and unlabelled high-entropy strings (20+ characters; shorter ones need a name).
   Name/value pairs whose name is apart from the value (XML elements and ``<key>``/``<value>``
   siblings, Kubernetes ``name:``/``value:``, call arguments such as ``getenv("PW", "v")``,
   lists under a secret's name, ``a, b = "x", "y"``, Dockerfile ``ENV``, SQL ``IDENTIFIED
   BY``, ``mysql -p``/``sshpass``/``redis-cli -a``/``docker login -p``, ``.netrc``) are
   ``factbank.redact.pairs``; secret words and prose in other languages (``das Passwort ist``,
   ``パスワードは``) are part of the assignment and prose rules.
3. Kingfisher (MongoDB's scanner, ``kingfisher-secret-scanner``): ~490 provider rules (the
   Betterleaks/gitleaks catalog plus Google's Veles) in one Vectorscan database, scanned
   in-process, plus the five gitleaks rules its catalog lacks, ``generic-api-key`` above all
   (``data/gitleaks-extra.toml``, copied from gitleaks; ``factbank.redact.gitleaks_rules``
   applies gitleaks' entropy floor, allowlists and stopwords to what they find). It adds what
   the layers above miss (Azure AD, Bedrock, Sourcegraph, 42-intra, curl auth headers, hundreds
   of SaaS tokens), reported as ``kf_<rule>``; where a layer above found the same span, that
   layer's narrower span and kind win, and a URL password that layer declined stays declined.
   Measured on public scanner fixtures by ``python -m factbank_evals.redaction_recall``, speed
   by ``python -m factbank_evals.redaction_bench``.
4. Example and mask values are dropped from every layer's findings (``AKIAIOSFODNN7EXAMPLE``,
   ``xxxx``, ``***``, ``[Redacted]``, ``fake``, ``not_a_real_token``, ``mypassword``, also when
   the mark sits just past a provider rule's match), and so are provider-prefixed identifiers
   whose body is words (``hf_requiredCharacteristicTypes``, ``hf_serving_cell_prio``), provider
   shapes starting inside a longer number, JWT shapes without a JSON header, format strings
   (``"prefix_{}"``), YAML tags (``!Ref``), shell command substitutions, punctuation-only
   values and URL passwords that repeat the user (``postgres:postgres@``).
5. Every detected value that is secret-shaped is then also replaced wherever else it occurs in
   the text (and, through :func:`redact_fields`, in the fact's other fields), so a key quoted
   once with its name and once bare does not leak through the bare copy.

Decisions (documented because they are policy, not accident):

* **Placeholders are not secrets.** A placeholder names or points at a secret without being one:
  variable references (``${DB_PASSWORD}``, ``$DB_PASSWORD``, ``%DB_PASSWORD%``,
  ``{{ vault_db_pw }}``, ``os.environ["X"]``, ``settings.DB_PASSWORD``), angle-bracket slots
  (``<redacted>``, ``<your-token>``), masks (``***``, ``xxxx``, ``....``), our own
  ``[REDACTED:...]`` marker, and stock words (``password``, ``secret``, ``token``, ``none``,
  ``null``, ``true``/``false``, ``empty``, ``redacted``, ``placeholder``, ``changeme`` is *not*
  one: it is a real default password). Keeping them lets facts like "the app reads
  PASSWORD=${DB_PASSWORD} from the env" survive.
* **Bare hex is an identifier, not a secret.** Hex-only strings (git SHAs of any length, md5/
  sha1/sha256/sha512 digests, docker ``sha256:`` digests, Mongo ObjectIds) are never redacted by
  the entropy rule. Hex becomes a secret only when it is *named* as one (``API_KEY=<hex>``,
  "the api key is <hex>", or a secret word shortly before it with no commit/digest label closer).
* **A secret word right before a value** ("what is the backup password Xy7!pQ2zLm9wQ?",
  "passphrase Tr0ub4dor&3xQ", "密钥 AbC9dEf2...") is a secret when the value cannot be a word:
  8+ characters of three classes, or 12+ mixing letters and digits that are not an identifier,
  a version or a path; "the password policy", "token bucket", "API key rotation" stay. It runs
  after the provider rules, which say more when they find the same span. Measured on both
  scanner corpora: caught 0.951 and kept 0.970 before and after.
* **Base64 of plain text is not a secret.** A token the entropy rule would take is decoded
  first; printable UTF-8 prose (3+ words, or CJK) holding no secret itself is kept.
  Base64 of a secret, or of random bytes, is still redacted.
* **Labelled checksums survive.** ``sha256:...``, ``sha512-<base64>`` (npm/SRI integrity) and a
  base64 string right after "checksum"/"digest"/"hash"/"integrity" are kept.
* **Identifiers that merely look random survive:** UUIDs, ULIDs, paths (segments that read like
  names), kebab/snake names with word parts and short random parts (pod names such as
  ``api-7d9f8b6c5d-x2x4z``), CamelCase identifiers (``Base64HighEntropyString``), punycode,
  SSH public keys and a lone JWT header.
* **URL paths are provenance.** A URL is often the fact's source, so the entropy rule skips its
  host and path (a Google Docs id stays); passwords in the userinfo, query values and URLs whose
  path is the credential (Slack and Discord webhooks) are still redacted.
"""

from __future__ import annotations

import base64
import json
import math
import re
import string
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from detect_secrets.filters import heuristic
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    C_PLUS_PLUS_REGEX_TO_GROUP,
    COMMON_C_DENYLIST_REGEX_TO_GROUP,
    FOLLOWED_BY_COLON_EQUAL_SIGNS_REGEX,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    KeywordDetector,
)
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from kingfisher_sdk import Rules as _KingfisherRules
from kingfisher_sdk import Scanner as _KingfisherScanner

from factbank.errors import Refused
from factbank.redact import gitleaks_rules, pairs

__all__ = [
    "PLUGINS",
    "Finding",
    "clean_fields",
    "clean_text",
    "clean_value",
    "redact_fields",
    "redact_text",
    "warm_up",
]


@dataclass(frozen=True)
class Finding:
    """One redacted secret. Deliberately carries no part of the value, so findings can be
    logged, returned to the client and audited without re-leaking what was removed."""

    field: str
    kind: str


# --- detect-secrets plugins ---------------------------------------------------------------

# Regex plugins, with the kind we report. Plugins left out on purpose: IPPublicDetector (a host
# address is a fact, not a secret), Artifactory/Cloudant/IBM/Softlayer (keyword-context regexes
# that the assignment rule covers, and Artifactory's ``AP[0-9A-F]`` password regex fires on
# ordinary identifiers), NpmDetector (its `//.+/:_authToken=` regex is quadratic on a long
# line; `npm_` tokens are an extra pattern below and `_authToken=` values an assignment).
_REGEX_PLUGINS: tuple[tuple[RegexBasedDetector, str], ...] = (
    (AWSKeyDetector(), "aws_access_key"),
    (AzureStorageKeyDetector(), "azure_storage_key"),
    (BasicAuthDetector(), "url_password"),
    (DiscordBotTokenDetector(), "discord_token"),
    (GitHubTokenDetector(), "github_token"),
    (GitLabTokenDetector(), "gitlab_token"),
    (JwtTokenDetector(), "jwt"),
    (MailchimpDetector(), "mailchimp_key"),
    (OpenAIDetector(), "openai_key"),
    (PypiTokenDetector(), "pypi_token"),
    (SendGridDetector(), "sendgrid_key"),
    (SlackDetector(), "slack_token"),
    (SquareOAuthDetector(), "square_oauth"),
    (StripeDetector(), "stripe_key"),
    (TelegramBotTokenDetector(), "telegram_token"),
    (TwilioKeyDetector(), "twilio_key"),
)
# Plugins whose capturing group *is* the secret (the rest of the match is context such as
# ``aws_secret_access_key = "`` or ``://user:``). For the others a group is only a prefix
# (``ghp``), so the whole match is the secret.
_VALUE_GROUP_PLUGINS = (AWSKeyDetector, BasicAuthDetector)
_PRIVATE_KEY = PrivateKeyDetector()
_KEYWORD = KeywordDetector()
# detect-secrets' keyword regexes of every language it knows, each searched on a line: quoted
# ``name = "v"``, ``name: "v"``, ``"v" == name``, ``name => "v"`` (Python, JS, Java, Swift,
# Terraform), Go's ``name := v``, C and Objective-C's ``name[25] = @"v"``, C++'s
# ``name("v")`` and ``name.assign("v")``. Its unquoted config forms are left to the
# assignment rule, which knows placeholders and YAML better.
_KEYWORD_REGEXES = {
    **QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    FOLLOWED_BY_COLON_EQUAL_SIGNS_REGEX: 4,
    **COMMON_C_DENYLIST_REGEX_TO_GROUP,
    **C_PLUS_PLUS_REGEX_TO_GROUP,
}
# KeywordDetector's regexes are slow (~1 ms for a 500-char line); each of its quote-requiring
# patterns needs one of its keywords and a quote, so lines without both are skipped up front.
_KEYWORD_GATE = re.compile("|".join(KEYWORD_DENYLIST), re.IGNORECASE)
# Only used for their Shannon entropy maths (charset-aware; hex discounts all-digit strings).
_B64 = Base64HighEntropyString()
_HEX = HexHighEntropyString()

PLUGINS: tuple[str, ...] = tuple(
    sorted(
        [type(p).__name__ for p, _ in _REGEX_PLUGINS]
        + [type(p).__name__ for p in (_PRIVATE_KEY, _KEYWORD, _B64, _HEX)]
    )
)

# Lower number wins when two detections overlap (the union is redacted under that kind).
# Kingfisher's provider rules (``kf_*``) rank after our own kinds, so a span both find keeps
# the kind it always had, and before the bare entropy rule, which says less.
_GENERIC_PRIORITY = {"url_password": 1, "bearer_token": 1, "assignment": 2, "high_entropy": 4}
_SCANNER_PRIORITY = 3

# --- Kingfisher (MongoDB, maintained): ~460 provider rules (the Betterleaks/gitleaks catalog
# plus Google's Veles) compiled into one Vectorscan database, scanned in-process in Rust. ----

_scanner_lock = threading.Lock()
_scanner_rules: _KingfisherRules | None = None
_scanner_local = threading.local()


def warm_up() -> None:
    """Compile the scanner's rules now (about 6 s the first time on a machine, under 1 s
    from its on-disk cache later) instead of on the first write."""
    _scanner()


def _scanner() -> _KingfisherScanner:
    """One scanner per thread over one shared, compiled rule set."""
    global _scanner_rules
    scanner = getattr(_scanner_local, "scanner", None)
    if scanner is None:
        with _scanner_lock:
            if _scanner_rules is None:
                gitleaks_rules.warm_up()
                _scanner_rules = _KingfisherRules([gitleaks_rules.path()], confidence="low")
            rules = _scanner_rules
        # base64=False: decoding every base64-looking run costs time on every write and finds
        # secrets inside blobs that the entropy rule redacts whole anyway.
        scanner = _KingfisherScanner(rules, base64=False)
        _scanner_local.scanner = scanner
    return scanner


# --- additions: specific token shapes detect-secrets 1.5 does not know ----------------------

_EXTRA_TOKENS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_\-]{20,}"), "anthropic_key"),
    (re.compile(r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}"), "openai_key"),
    (re.compile(r"github_pat_[A-Za-z0-9_]{40,}"), "github_token"),
    (re.compile(r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}"), "npm_token"),
    (re.compile(r"xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]{32,}"), "slack_token"),
    (re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"), "huggingface_token"),
    (re.compile(r"(?<![A-Za-z0-9])[rs]k_test_[0-9A-Za-z]{24,}"), "stripe_key"),
    (re.compile(r"AIza[0-9A-Za-z_\-]{35}"), "google_api_key"),
    (re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{20}"), "gitlab_token"),
    (re.compile(r"(?<![A-Za-z0-9])hv[sb]\.[A-Za-z0-9_\-]{24,}"), "vault_token"),
    (re.compile(r"(?<![A-Za-z0-9])dop_v1_[a-f0-9]{64}"), "digitalocean_token"),
    (re.compile(r"(?<![A-Za-z0-9])shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"), "shopify_token"),
    (re.compile(r"(?<![A-Za-z0-9])glsa_[A-Za-z0-9]{32}_[a-fA-F0-9]{8}"), "grafana_token"),
    (re.compile(r"(?<![A-Za-z0-9])PMAK-[a-f0-9]{24}-[a-f0-9]{34}"), "postman_key"),
    (re.compile(r"(?<![A-Za-z0-9])NRAK-[A-Z0-9]{27}"), "newrelic_key"),
    (re.compile(r"(?<![A-Za-z0-9])lin_api_[A-Za-z0-9]{40}"), "linear_key"),
    (re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{58}"), "age_secret_key"),
    # Azure AD (Entra) client secrets: three characters, a digit, ``Q~``, 31-34 more.
    (
        re.compile(r"(?<![\w~.\-])[\w~.]{3}\dQ~[\w~.\-]{31,34}(?![\w~.\-])"),
        "azure_ad_client_secret",
    ),
    # URL paths are exempt from the entropy rule (a URL is often the fact's source), so URLs
    # whose path *is* the credential are listed here (Slack's is a detect-secrets plugin).
    (
        re.compile(r"(?<=discord\.com/api/webhooks/)\d+/[A-Za-z0-9_\-]{60,}"),
        "discord_webhook",
    ),
    (
        re.compile(r"(?<=discordapp\.com/api/webhooks/)\d+/[A-Za-z0-9_\-]{60,}"),
        "discord_webhook",
    ),
)

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-=]*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")

# PEM blocks: detect-secrets finds the BEGIN marker; we extend to the whole block.
_PEM_END = re.compile(r"-{3,5} ?END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)? ?-{3,5}")
_PEM_BODY_CHUNK = re.compile(
    r"(?:[ \t]|\r?\n|\\r|\\n)*"
    r"(?:(?:Proc-Type|DEK-Info|Comment|Encryption|Public-Lines|Private-Lines): [^\n\\]*"
    r"|[A-Za-z0-9+/=]{16,})"
)
_REST_OF_LINE_BLANK = re.compile(r"[^\S\n]*(?:\n|\Z)")
_PEM_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16}")
_PUTTY_END = re.compile(r"Private-MAC: *[0-9a-fA-F]+")

# --- URL and connection-string passwords ----------------------------------------------------

# ``scheme://[user]:password@host`` (user may be empty: ``redis://:pw@host``). The password
# runs to the last ``@`` before the host, so ``p@ss`` inside a password is covered.
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://(?P<user>[^\s:/@\"'`]*):"
    r"(?P<v>[^\s/@\"'`]+(?:@[^\s/@\"'`]+)*)@"
)

_USER_FLAG = re.compile(r"(?<!\S)(?:-u|--user|--proxy-user)[ =][\"']?[^\s:\"']+:(?P<v>[^\s\"']+)")

# --- named assignments ----------------------------------------------------------------------

_SECRET_WORDS = (
    r"password|passwd|passphrase|pwd|pass|secret|token|credentials?|"
    r"api[_\-]?key|apikey|key|"
    # the same words in other languages (de, es, pt, fr, nl, sv, fi, pl, cs, tr, ru)
    r"passwort|kennwort|geheimnis|contrase[ñn]a|clave|senha|segredo|secreto|"
    r"mot_?de_?passe|wachtwoord|l[öo]senord|salasana|has[łl]o|heslo|[şs]ifre|пароль"
)
_ASSIGNMENT = re.compile(
    # quotes may be escaped (``{\\"token\\": \\"...\\"}``, JSON inside a string or a log)
    r"(?<![A-Za-z0-9_\-.])(?P<q>\\?[\"']?)(?P<name>-{0,2}[A-Za-z0-9_.\-]*?(?:"
    + _SECRET_WORDS
    + r"))(?P=q)"
    r"(?P<sep>[ \t]*(?::=|=>|==|=|:)[ \t]*|[ \t]+(?=\S))"
    r"(?:(?P<qq>\\?[\"'`])(?P<qv>[^\"'`\n]{0,300})(?P=qq)"
    r"|(?P<ph>\$\{[^}\n]*\}|\{\{[^}\n]*\}\}|<[^>\n]*>|%[A-Za-z_][A-Za-z0-9_]*%|\[REDACTED[^\]]*\])"
    r"|(?P<uv>[^\s\"'`,;&<>()\[\]{}，。；：、（）「」]{1,512}))",
    re.IGNORECASE,
)
_SECRET_NAME_END = re.compile(r"(?:" + _SECRET_WORDS + r")$", re.IGNORECASE)
# The secret words anywhere in a name (``db_password_prod``, ``apikey_myservice``).
_SECRET_WORD = re.compile(_SECRET_WORDS, re.IGNORECASE)
# What a name says *about* a secret rather than holding it, after its secret word:
# ``password_hash``, ``PASSWORD_MIN_LENGTH``, ``token_url``, ``secretName``, ``key_id``.
_METADATA_TAIL = re.compile(
    r"(?:hash|digest|salt|name|id|ids|length|len|size|min|max|count|url|uri|endpoint|host"
    r"|path|file|dir|env|var|type|kind|field|label|header|param|policy|rule|regex|pattern"
    r"|format|prompt|hint|question|reset|expiry|expires?|ttl|timeout|age|rotation|version"
    r"|enabled|required|optional|valid|strength|manager|store|provider|ref|arn|location"
    r"|content|input|error|message|placeholder|changed|updated|created|date|at|budget"
    r"|limit|mode|scope|alias|prefix|suffix|template|source|config|settings|example)"
    r"(?![a-z])",
    re.IGNORECASE,
)
_NAME_BEFORE = re.compile(
    r"([A-Za-z0-9_.\-]+)(?:\[[0-9]*\])?[\"'\]]*\s*(?::=|=>|[!=]==?|=|:|\(|\.assign\()?\s*@?"
    r"[\"'`]$"
)
_NAME_AFTER = re.compile(r"[\"'`]\s*[!=]==?\s*([A-Za-z0-9_.\-]+)")
# "the password is hunter2", "api key was ..."; needs a secret-shaped value.
_PROSE = re.compile(
    r"(?<![A-Za-z])(?P<name>password|passphrase|passwd|secret|token|api[ _\-]?key|access key"
    r"|secret key|credentials?|key)"
    r"(?:(?:\s+(?:in|for|on|of|from|at)\s+[\w.\-/]{1,40}){0,2}"  # "credential in Vault is"
    r"\s+(?:is|was|are)\s+"
    # "the password for the admin user: ..." (a colon only after such a phrase: "cache key:
    # user123" is a field, not a secret)
    r"|(?:\s+(?:in|for|on|of|from|at)(?:\s+[\w.\-/]{1,40}){1,3}){1,2}\s*:\s+)"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\n]{1,200})(?P=q)|(?P<uv>[^\s\"'`,;<>()\[\]{}，。；：、（）]+))",
    re.IGNORECASE,
)
# The secret word right before its value, no verb or sign between: "what is the
# backup password Xy7!pQ2zLm9wQ?", "passphrase Tr0ub4dor&3xQ for the vault", "the admin
# password? it's Hunter2!xyz". Only a value that cannot be a word is taken
# (`_bare_secret_value`), so "the password policy", "token bucket", "API key rotation", "secret
# scanning" stay.
_PROSE_BARE = re.compile(
    r"(?<![A-Za-z])(?:password|passphrase|passwd|secret|token|api[ _\-]?key|access key"
    r"|secret key)s?(?:\s*\?\s*(?:it'?s|it is)\s+|\s+)"
    r"(?P<uv>[^\s\"'`,;<>()\[\]{}，。；：、（）]+)",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)+(?:[-+.][\w.]+)?$", re.IGNORECASE)
# Other languages: "das Passwort ist ...", "la contraseña es ...", "o segredo é ...".
_PROSE_INTL = re.compile(
    r"(?<![A-Za-z])(?P<name>passwort|kennwort|contrase[ñn]a|clave|senha|segredo|secreto"
    r"|mot de passe|wachtwoord|l[öo]senord|salasana|has[łl]o|heslo|[şs]ifre|пароль)"
    r"\s+(?:ist|lautet|es|est|é|is|är|on|jest|je|:|—|-)\s+"
    r"(?:(?P<q>[\"'`«„“])(?P<qv>[^\"'`»“”\n]{1,200})[\"'`»“”]"
    r"|(?P<uv>[^\s\"'`,;<>()\[\]{}]+))",
    re.IGNORECASE,
)
# Chinese, Japanese, Korean: 密码是 hunter2 / 密钥：AKIA... / パスワードは ... / 비밀번호: ...
_ZH = re.compile(
    r"(?:(?:密码|口令|密钥|秘钥|私钥|令牌|凭证|凭据|密碼|金鑰|密鑰|憑證|權杖|パスワード|暗証番号"
    r"|秘密鍵|アクセスキー|トークン|비밀번호|암호|토큰|비밀\s?키)"
    r"\s*(?:是|为|為|は|が|는|은|:|：|=)?"
    r"|(?<![A-Za-z])(?:token|api ?key|secret|password|access ?key)\s*(?:是|为))"
    r"\s*[「“\"'`]?(?P<uv>[!-~]+?)(?=[\s」”\"'`，。；、）]|[^\x00-\x7f]|$)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?<![A-Za-z])(?:Bearer|Basic|token)\s+(?P<v>[A-Za-z0-9._~+/\-]{16,}=*)")

# ``<word>_KEY`` names that always hold key material, whatever the value looks like.
_STRONG_KEYS = tuple(
    f"{w}key"
    for w in """secret private access api auth encryption signing master client service account
    app license hmac crypt session jwt webhook admin deploy""".split()
)
_PLACEHOLDER_WORDS = frozenset(
    """password passwd pass pwd secret secrets token tokens key apikey api_key none null nil
    true false yes no on off empty redacted placeholder example your_password your_token
    your_key your_api_key todo tbd value undefined required optional string str bearer basic
    env environment vault dummy fake test testing sample demo foo bar baz blah n/a na unused
    ignored not-needed notneeded not_needed anything whatever""".split()
)
_REFERENCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?$")
_KEY_SHAPED = re.compile(r"^[A-Za-z0-9+/_\-]{16,}={0,2}$")
_PLAIN_IDENTIFIER = re.compile(r"^[a-z]+(?:[_.\-][a-z]+)*$")
_UPPER_SNAKE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")

# --- high entropy ---------------------------------------------------------------------------

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-]{20,}={0,2}(?![A-Za-z0-9+/_\-=])")
_HEX_RUN = re.compile(r"^[0-9a-fA-F]+$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_TAME_SEGMENT = re.compile(
    r"^(?:[a-z0-9._\-]*|[A-Z]?[a-z]+(?:[A-Z][a-z0-9]+)*|[A-Z0-9_\-]*|v?\d{1,8}[a-z]{0,3})$"
)
_DIGEST_LABEL = re.compile(
    r"(sha1|sha-1|sha224|sha256|sha-256|sha384|sha512|sha-512|md5|blake2b?|checksums?|digests?|"
    r"hash(?:es)?|integrity|commit|rev|revision|etag|object ?id|fingerprint)\W{0,3}$",
    re.IGNORECASE,
)
# ``ssh-ed25519 AAAAC3Nz...``: a public key is meant to be shared.
_PUBLIC_KEY_LABEL = re.compile(r"(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp\d+|sk-ssh-\S+) $")
_PIECE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_LOWER_WORD = re.compile(r"^[a-z]{3,}$")
_CONSONANT_RUN = re.compile(r"[^aeiouy]{4,}")
_SECRET_PREFIX = re.compile(
    r"(?:api|auth|access|secret|private|sk|rk)?[_\-]?(?:key|secret|token|pass|pwd|sk)[_\-]$",
    re.IGNORECASE,
)
_SRI = re.compile(r"^(?:sha(?:1|256|384|512))-", re.IGNORECASE)
_SECRET_CONTEXT = re.compile(
    r"(api[ _\-]?key|secret|token|password|passwd|credential|private key|access key|"
    r"密钥|秘钥|密码|令牌|凭证)",
    re.IGNORECASE,
)
_DIGEST_CONTEXT = re.compile(
    r"(sha\d*|md5|digest|checksum|hash|commit|revision|\brev|etag|fingerprint|\bid\b)",
    re.IGNORECASE,
)

_Span = tuple[int, int, str]


# --- public API -----------------------------------------------------------------------------


def redact_text(text: str, field: str = "content") -> tuple[str, list[Finding]]:
    """Replace every secret in ``text`` with ``[REDACTED:kind]``.

    Returns the redacted text and one Finding per replaced span. The caller decides the bank's
    policy (store the redacted text, or reject when findings is non-empty)."""
    spans = _detect(text)
    values = _propagatable_values(text, spans)
    spans = _merge(spans + _occurrences(text, values))
    return _apply(text, spans), [Finding(field, kind) for _, _, kind in spans]


def redact_fields(
    fields: Mapping[str, str | list[str] | None],
) -> tuple[dict[str, str | list[str] | None], list[Finding]]:
    """Redact every text field of a fact; list fields (tags) item by item as ``tags[i]``.

    A secret found in one field is also removed from the others, because a quote often names a
    key (``API_KEY=...``) that the content then repeats bare, where it would not be recognised
    on its own."""
    flat: list[tuple[str, str]] = []
    for name, value in fields.items():
        if isinstance(value, list):
            flat.extend((f"{name}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str):
            flat.append((name, value))
    detected = {label: _detect(text) for label, text in flat}
    values: dict[str, str] = {}
    for label, text in flat:
        values.update(_propagatable_values(text, detected[label]))
    redacted: dict[str, str] = {}
    findings: list[Finding] = []
    for label, text in flat:
        spans = _merge(detected[label] + _occurrences(text, values))
        redacted[label] = _apply(text, spans)
        findings.extend(Finding(label, kind) for _, _, kind in spans)
    out: dict[str, str | list[str] | None] = {}
    for name, value in fields.items():
        if isinstance(value, list):
            out[name] = [redacted[f"{name}[{i}]"] for i in range(len(value))]
        elif isinstance(value, str):
            out[name] = redacted[name]
        else:
            out[name] = value
    return out, findings


# --- the one step every other stored or echoed string passes through -------------------------
#
# A fact's own fields go through `redact_fields` in the gate. Everything else a request can put
# into a row, a log line or a response (reasons, a category's description, a fact's project and
# agent, the X-Factbank-Agent header, tags and questions edited later, member names and token
# labels, audit targets and details, error messages) goes through `clean_text`/`clean_fields`.


def _refuse(findings: list[Finding]) -> None:
    raise Refused(
        [
            {
                "field": f.field,
                "reason": f"this bank rejects secrets; {f.field} holds one ({f.kind})",
            }
            for f in findings
        ]
    )


def clean_text(field: str, value: str, policy: str = "redact") -> str:
    """``value`` with every secret replaced by ``[REDACTED:kind]``; with the ``reject`` policy a
    value holding a secret is refused instead (`errors.Refused` naming ``field``)."""
    if not value:
        return value
    clean, findings = redact_text(value, field)
    if findings and policy == "reject":
        _refuse(findings)
    return clean


def clean_fields(
    fields: Mapping[str, str | list[str] | None], policy: str = "redact"
) -> dict[str, str | list[str] | None]:
    """`redact_fields` under a bank's policy: redacted, or refused naming each field."""
    clean, findings = redact_fields(fields)
    if findings and policy == "reject":
        _refuse(findings)
    return clean


def clean_value(value: object, field: str = "detail") -> object:
    """Every string in a JSON-like value (dict keys too) redacted; other values as they are.
    One scan of all the strings joined when nothing is found (the usual case), so a large
    value costs one pass, not one per string."""
    strings: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, Mapping):
            stack.extend(k for k in v if isinstance(k, str))
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    if not strings or not redact_text("\n".join(strings), field)[1]:
        return value
    return _clean_walk(value, field)


def _clean_walk(value: object, field: str) -> object:
    if isinstance(value, str):
        return redact_text(value, field)[0]
    if isinstance(value, Mapping):
        return {
            (_clean_walk(k, field) if isinstance(k, str) else k): _clean_walk(v, field)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_clean_walk(v, field) for v in value]
    return value


# --- detection ------------------------------------------------------------------------------


def _detect(text: str) -> list[_Span]:
    """All secret spans in ``text``, overlaps merged, in text order."""
    if not text:
        return []
    spans: list[_Span] = []
    spans += _private_key_spans(text)
    spans += _plugin_spans(text)
    spans += _extra_token_spans(text)
    spans += _url_password_spans(text)
    spans += _user_flag_spans(text)
    spans += _bearer_spans(text)
    spans += _assignment_spans(text)
    spans += _pair_spans(text)
    spans += _keyword_plugin_spans(text)
    spans = [s for s in spans if not _example_span(text, s)]
    # Kingfisher adds what the layers above missed. Where they found something too, their
    # span wins: a scanner rule often reports a whole credential pair or URI
    # (``admin:pw``, ``mongodb+srv://user:pw@host``), while we redact only the password.
    spans += [
        s
        for s in _scanner_spans(text)
        if not _example_span(text, s) and not any(s[0] < e and b < s[1] for b, e, _ in spans)
    ]
    spans += _prose_bare_spans(text, spans)
    spans += _high_entropy_spans(text, spans)
    return _merge(spans)


def _example_span(text: str, span: _Span) -> bool:
    """A detection whose value is an example or a mask (private-key blocks are kept whole:
    a PEM body is base64, and its markers are what matched)."""
    start, end, kind = span
    if kind in ("private_key", "gcp_private_key"):
        return False
    value = text[start:end]
    if _example_value(value):
        return True
    if kind in _GENERIC_PRIORITY:
        return False
    # A provider rule may stop short of an example mark at the token's end (``lin_api_...
    # EXAMP`` + ``LE``): the whole token is tested.
    lo, hi = start, end
    while lo > 0 and text[lo - 1] in _TOKEN_CHARS:
        lo -= 1
    while hi < len(text) and text[hi] in _TOKEN_CHARS:
        hi += 1
    if (lo, hi) != (start, end) and _example_value(text[lo:hi]):
        return True
    # A provider shape that starts inside a longer number is not that provider's token
    # (a Telegram ``<8-10 digits>:<35>`` inside ``arn:aws:sns:...:111122223333:...``).
    if value[:1].isdigit() and start > 0 and text[start - 1].isdigit():
        return True
    # A provider-shaped match (not a named value) must have a random body.
    return kind != "jwt" and _identifier_token(value)


def _scanner_spans(text: str) -> list[_Span]:
    """Kingfisher's findings, located in ``text`` (its offsets are UTF-8 byte offsets)."""
    data = text.encode("utf-8")
    ascii_only = len(data) == len(text)
    out: list[_Span] = []
    for finding in _scanner().scan(data):
        if not finding.visible:
            continue  # a helper match another rule needs (an account id next to a key)
        loc = finding.location
        start, end = loc["start_offset"], loc["end_offset"]
        if not ascii_only:
            start = len(data[:start].decode("utf-8", "ignore"))
            end = len(data[:end].decode("utf-8", "ignore"))
        value = text[start:end]
        if not value.strip() or _scanner_placeholder(value):
            continue
        if not gitleaks_rules.kept(finding.rule_id, text, start, end):
            continue
        if finding.rule_id == _GITLEAKS_GENERIC and _prose_name(text, start, end):
            continue
        if text.startswith("@", end) and not _url_password_ok(text, start, value):
            continue  # a URL password our own URL rule declined (user:abc@, postgres:postgres@)
        out.append((start, end, _scanner_kind(finding.rule_id)))
    return out


_GITLEAKS_GENERIC = gitleaks_rules.PREFIX + "generic-api-key"


def _prose_name(text: str, start: int, end: int) -> bool:
    """gitleaks' generic rule lets up to 20 characters of words and spaces sit between its
    keyword and the separator (``api key =``), which in prose reads a sentence as a name:
    ``The key is a UUID: 123e...``. Two or more spaces in that name make it a sentence;
    prose that names a secret is the prose rule's to judge."""
    whole = gitleaks_rules.match(_GITLEAKS_GENERIC, text, start, end) or ""
    name = whole[: max(0, whole.rfind(text[start:end]))].rstrip(" \t'\"`=:>,|?")
    return name.strip().count(" ") >= 2


def _scanner_kind(rule_id: str) -> str:
    name = rule_id.split(".", 1)[-1]
    return "kf_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _scanner_placeholder(value: str) -> bool:
    return _is_placeholder(value) or _example_value(value)


def _plugin_spans(text: str) -> list[_Span]:
    """Run each detect-secrets regex plugin's own patterns, keeping positions."""
    out: list[_Span] = []
    for pattern, kind, value_group in _runnable(text, _plugin_table()):
        for m in pattern.finditer(text):
            if value_group and m.lastindex:
                group = max(range(1, m.lastindex + 1), key=lambda g: m.end(g) - m.start(g))
                start, end = m.start(group), m.end(group)
                value = (text[start:end].split() or [""])[0]  # npm's group runs to EOL
                end = start + len(value)
                if kind == "url_password" and not _url_password_ok(text, start, value):
                    continue
            else:
                start, end = m.start(), _extend_token(text, m.end(), jwt=kind == "jwt")
                if text.startswith("AccountKey=", start):  # keep the name, as for NAME=
                    start += len("AccountKey=")
                if kind == "jwt" and not JwtTokenDetector.is_formally_valid(
                    text[start:end].rstrip(".")
                ):
                    end = m.end()
                    if not _jwt_header(text[start:end].split(".", 1)[0]):
                        continue  # eyJAAAA.eyJBBB: JWT-shaped, but no JSON header
            if kind == "aws_access_key" and not value_group_match(m):
                # an access key id is a whole word: not TODAYINASIAASACKOFRICEFELLOVER
                if _alnum_at(text, start - 1) or _alnum_at(text, end):
                    continue
            if end > start:
                out.append((start, end, kind))
    return out


def value_group_match(m: re.Match[str]) -> bool:
    return bool(m.lastindex)


def _extend_token(text: str, end: int, jwt: bool = False) -> int:
    """Regex plugins may stop short (the JWT pattern ends lazily before the signature)."""
    m = (_JWT_TAIL if jwt else _TOKEN_TAIL).match(text, end)
    new_end = m.end() if m else end
    while jwt and new_end > end and text[new_end - 1] == ".":
        new_end -= 1
    return new_end


def _extra_token_spans(text: str) -> list[_Span]:
    out: list[_Span] = []
    for pattern, kind, _ in _runnable(text, _extra_table()):
        for m in pattern.finditer(text):
            end = _extend_token(text, m.end())
            if not _identifier_token(text[m.start() : end]):
                out.append((m.start(), end, kind))
    return out


# (pattern, kind, value group?, required literals, case-insensitive), built once
_Row = tuple[re.Pattern[str], str, bool, tuple[str, ...], bool]
_TABLES: dict[str, list[_Row]] = {}


def _row(pattern: re.Pattern[str], kind: str, value_group: bool) -> _Row:
    return (pattern, kind, value_group, _required_literals(pattern), _caseless(pattern))


def _plugin_table() -> list[_Row]:
    if "plugins" not in _TABLES:
        _TABLES["plugins"] = [
            _row(pattern, kind, isinstance(plugin, _VALUE_GROUP_PLUGINS))
            for plugin, kind in _REGEX_PLUGINS
            for pattern in plugin.denylist
        ]
    return _TABLES["plugins"]


def _extra_table() -> list[_Row]:
    if "extra" not in _TABLES:
        _TABLES["extra"] = [_row(pattern, kind, False) for pattern, kind in _EXTRA_TOKENS]
    return _TABLES["extra"]


def _anchor_gates() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """One regex of every case-sensitive literal and one of every caseless one: a text that
    holds none (most stored strings: tags, reasons) skips every anchored pattern after two
    searches, instead of a substring test per pattern."""
    if "gates" not in _TABLES:
        rows = _plugin_table() + _extra_table()
        cs = {a for *_, anchors, caseless in rows if not caseless for a in anchors}
        ci = {a for *_, anchors, caseless in rows if caseless for a in anchors}

        def union(words: set[str]) -> re.Pattern[str]:
            return re.compile("|".join(map(re.escape, sorted(words))) or "(?!)")

        _TABLES["gates"] = [union(cs), union(ci)]  # type: ignore[list-item]
    cs_gate, ci_gate = _TABLES["gates"]  # type: ignore[misc]
    return cs_gate, ci_gate  # type: ignore[return-value]


def _runnable(text: str, table: list[_Row]):
    """The table's patterns that may match ``text`` (a literal each needs is present)."""
    lower = text.lower()
    cs_gate, ci_gate = _anchor_gates()
    any_anchor = bool(cs_gate.search(text) or ci_gate.search(lower))
    for pattern, kind, value_group, anchors, caseless in table:
        if anchors:
            if not any_anchor:
                continue
            hay = lower if caseless else text
            if not any(a in hay for a in anchors):
                continue
        yield pattern, kind, value_group


def _caseless(pattern: re.Pattern[str]) -> bool:
    return bool(pattern.flags & re.IGNORECASE) or "(?i" in pattern.pattern


def _required_literals(pattern: re.Pattern[str]) -> tuple[str, ...]:
    """Literals one of which every match contains: a run of literal characters in the
    pattern's top-level sequence, or the literals of a top-level group of alternatives, each of
    2+ characters (the longest shortest one wins). Empty when there is none: then the pattern
    always runs."""
    from re import _parser  # type: ignore[attr-defined]

    def candidates(items) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        run = ""
        for op, av in [*items, (None, None)]:
            name = str(op)
            if name == "LITERAL":
                run += chr(av)
                continue
            if run:
                out.append((run,))
                run = ""
            if name == "SUBPATTERN":
                out.extend(candidates(av[-1]))
            elif name == "BRANCH":
                per_branch = [max(candidates(b), key=_strength, default=()) for b in av[1]]
                if all(len(c) == 1 for c in per_branch):
                    out.append(tuple(c[0] for c in per_branch))
        return out

    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except re.error:
        return ()
    best = max(candidates(parsed), key=_strength, default=())
    if _strength(best) < 2:
        return ()
    return tuple(a.lower() for a in best) if _caseless(pattern) else best


def _strength(alternatives: tuple[str, ...]) -> int:
    return min(map(len, alternatives), default=0)


def _identifier_token(value: str) -> bool:
    """A token-shaped *identifier*: a known prefix followed by words, not random symbols
    (``hf_requiredCharacteristicTypesForDisplayMetadata``, ``xoxe.xoxp-1-initial``). Only
    bodies whose letter parts hold no digit qualify: a random body of 20+ base62 characters
    has one in all but ~0.5% of cases, and then it must also read as words."""
    parts = [p for p in re.split(r"[_\-.:]", value) if p][1:]
    words = [p for p in parts if not p.isdigit()]
    if not words or any(c.isdigit() for p in words for c in p):
        return False
    if all(_HEX_RUN.match(p) for p in words):
        return False  # hex words (cafebabe:deadbeef) are valid hex credentials
    letters = "".join(words)
    if (
        len(words) >= 2
        and letters.islower()
        and len(letters) >= 16
        and sum(c in "aeiouy" for c in letters) >= 0.3 * len(letters)
    ):
        # snake_case words (``hf_servingcell..._h_prio``): several lowercase parts with the
        # vowels of words; a random base62 or [a-z0-9] body of 16+ characters has a digit or
        # a capital in all but ~1 in 200,000 cases, and random letters are ~23% vowels.
        return True
    longest = max(words, key=len)
    if len(longest) < 6:
        return False
    return _camel_identifier(longest) or bool(
        _LOWER_WORD.match(longest.lower()) and _pronounceable(longest)
    )


def _private_key_spans(text: str) -> list[_Span]:
    """Whole private-key blocks, starting from detect-secrets' PrivateKeyDetector markers."""
    out: list[_Span] = []
    index: _PemIndex | None = None
    for pattern in _PRIVATE_KEY.denylist:
        for m in pattern.finditer(text):
            index = index or _PemIndex(text)
            start = m.start()
            while start > 0 and text[start - 1] == "-" and m.start() - start < 5:
                start -= 1
            end = _private_key_end(text, m.end(), index)
            if not _PEM_KEY_MATERIAL.search(text, m.end(), end):
                continue  # markers around nothing: "BEGIN PRIVATE KEY ... anything ... END"
            prefix = text[max(0, start - 40) : start]
            kind = "gcp_private_key" if re.search(r"private_key\W*$", prefix) else "private_key"
            out.append((start, end, kind))
    return out


class _PemIndex:
    """END markers, BEGIN words and PuTTY MAC lines of a text, found once, so that finding
    each block's end is a bisect, not a scan to the end of the text per BEGIN (quadratic on a
    paste of many headers)."""

    def __init__(self, text: str) -> None:
        self.ends = [(m.start(), m.end()) for m in _PEM_END.finditer(text)]
        self.end_starts = [s for s, _ in self.ends]
        self.begins = [m.start() for m in re.finditer("BEGIN", text)]
        self.putty = [(m.start(), m.end()) for m in _PUTTY_END.finditer(text)]
        self.putty_starts = [s for s, _ in self.putty]

    def end_after(self, pos: int) -> tuple[int, int] | None:
        i = bisect_left(self.end_starts, pos)
        return self.ends[i] if i < len(self.ends) else None

    def begin_between(self, start: int, end: int) -> bool:
        i = bisect_left(self.begins, start)
        return i < len(self.begins) and self.begins[i] + 5 <= end

    def putty_after(self, pos: int) -> tuple[int, int] | None:
        i = bisect_left(self.putty_starts, pos)
        return self.putty[i] if i < len(self.putty) else None


def _private_key_end(text: str, pos: int, index: _PemIndex) -> int:
    end_marker = index.end_after(pos)
    if end_marker and not index.begin_between(pos, end_marker[0]):
        return end_marker[1]
    putty = index.putty_after(pos)
    if putty:
        return putty[1]
    # No END line (a truncated quote): the header plus every body chunk that follows it.
    end = pos
    while end < len(text) and text[end] in "- ":
        end += 1
    while m := _PEM_BODY_CHUNK.match(text, end):
        end = m.end()
    return end


def _url_password_spans(text: str) -> list[_Span]:
    out: list[_Span] = []
    for m in _URL_PASSWORD.finditer(text):
        password = m.group("v")
        user = m.group("user")
        if user and password == "x-oauth-basic":
            # GitHub's convention: the token is the user part, the password a fixed word
            if not _is_placeholder(user) and len(user) >= 16:
                out.append((m.start("user"), m.end("user"), "url_password"))
            continue
        if _url_password_ok(text, m.start("v"), password):
            out.append((m.start("v"), m.end("v"), "url_password"))
    return out


_URL_USER_BEFORE = re.compile(r"://([^\s:/@\"'`]*):$")


def _url_password_ok(text: str, start: int, password: str) -> bool:
    """Not too short to be one (``user:abc@``), not a slot, not the user name again: a default
    pair (``postgres:postgres@``, ``mongodb:mongodb@``) is documentation, not a secret."""
    if len(password) < 4 or _is_placeholder(password):
        return False
    m = _URL_USER_BEFORE.search(text, max(0, start - 256), start)
    return not (m and m.group(1) == password)


def _user_flag_spans(text: str) -> list[_Span]:
    """``curl -u admin:pw``, ``--user admin:pw``: the password half of a CLI credential."""
    out: list[_Span] = []
    for m in _USER_FLAG.finditer(text):
        pair = m.group()[m.group().find(" ") + 1 :].lstrip("=\"'")
        if pair[:1] in "<$%{[":
            continue  # a slot: -u <user:password>, --user "$1:$2", -u ${{ vars.user }}:...
        if not _is_placeholder(m.group("v")):
            out.append((m.start("v"), m.end("v"), "url_password"))
    return out


def _bearer_spans(text: str) -> list[_Span]:
    out: list[_Span] = []
    for m in _BEARER.finditer(text):
        value = m.group("v")
        if (
            _has_letters_and_digits(value)
            and not _is_placeholder(value)
            and not _name_like(value)  # "token budget_for_session_2" is prose
            and not _camel_identifier(value)
        ):
            out.append((m.start("v"), m.end("v"), "bearer_token"))
    return out


_NAME_RUN = re.compile(r"[A-Za-z0-9_.\-]+")
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")


def _assignments(text: str):
    """The matches ``_ASSIGNMENT.search`` would find from left to right, resuming right after
    each separator, not after the value (in ``credentials: api_key = x`` the first "value" is
    itself the next assignment's name). Matched only where a secret word occurs, from the start
    of the name around it: searching the regex itself tries its lazy name at every position of
    the text (20-40 ms on a 10 KB fact; this way well under 1 ms)."""
    pos = 0
    for start in _secret_word_starts(text):
        if start < pos:
            continue
        ats = [start]
        if start > 0 and text[start - 1] in "\"'":
            ats.insert(0, start - 1)
            if start > 1 and text[start - 2] == "\\":
                ats.insert(0, start - 2)
        for at in ats:
            m = _ASSIGNMENT.match(text, at)
            if m and m.start() >= pos:
                yield m
                pos = m.end("sep")
                break


# Every secret word contains one of these (``api_key`` and ``apikey`` contain "key",
# ``motdepasse`` "pass"); ``str.find`` of 20 substrings is ~50x faster than the regex
# alternation on a text without any, which most stored strings are.
_WORD_TRIGGERS = (
    "pass", "pwd", "secret", "token", "credential", "key", "kennwort", "geheimnis", "contrase",
    "clave", "senha", "segredo", "wachtwoord", "senord", "salasana", "hasło", "haslo", "heslo",
    "ifre", "пароль",
)  # fmt: skip


def _secret_word_starts(text: str) -> list[int]:
    """Where a name holding a secret word may start: the start of each run of name characters
    (or of the word, for a word outside ASCII) around a trigger, in text order."""
    lower = text.lower()
    if len(lower) != len(text):  # lower() moved offsets (a few letters do): use the regex
        hits = [m.start() for m in _SECRET_WORD.finditer(text)]
    else:
        hits = []
        for trigger in _WORD_TRIGGERS:
            i = lower.find(trigger)
            while i >= 0:
                hits.append(i)
                i = lower.find(trigger, i + 1)
    if not hits:
        return []
    # The start of the run of name characters around each hit, from one pass over the runs
    # (scanning back from each hit would be quadratic on one long run: "passwordtoken" * 7500).
    runs = [(m.start(), m.end()) for m in _NAME_RUN.finditer(text)]
    run_starts = [r[0] for r in runs]
    starts = set()
    for i in hits:
        k = bisect_right(run_starts, i) - 1
        starts.add(runs[k][0] if k >= 0 and runs[k][0] <= i < runs[k][1] else i)
    return sorted(starts)


def _assignment_spans(text: str) -> list[_Span]:
    """``NAME=value`` style secrets: the value is redacted, the name kept."""
    out: list[_Span] = []
    for m in _assignments(text):
        if m.group("ph") is not None:
            continue
        name = m.group("name")
        if not _is_secret_name(name):
            continue
        sep = m.group("sep")
        if not sep.strip() and not name.startswith("-"):
            continue  # space-separated only for CLI flags: --password hunter2
        quoted = m.group("qv") is not None
        group = "qv" if quoted else "uv"
        value = m.group(group)
        start = m.start(group)
        if quoted and m.group("qq") == "`" and " " in value.strip():
            continue  # a shell command substitution: KEY=`vault read -field=x secret/app`
        if not quoted:
            if value.endswith(("..", "…")):
                continue  # elided: OP_SERVICE_ACCOUNT_TOKEN=ops_eyJzaWdu...
            value = _trim_unquoted(value)
            after = text[start + len(value) : start + len(value) + 3]
            if after[:1] in ("(", "[") or re.match(r"\s*[=:]", after):
                continue  # token = get_token(), key = os.environ["KEY"], credentials: name = ...
        at_line_end = bool(_REST_OF_LINE_BLANK.match(text, m.end()))
        if _accept_assignment(
            name,
            value,
            sep.strip(),
            quoted=quoted,
            spaced=sep != sep.strip(),
            spaced_after=sep != sep.rstrip(),
            standalone=at_line_end,
        ):
            out.append((start, start + len(value), "assignment"))
    for pattern in (_PROSE, _PROSE_INTL, _ZH):
        if pattern is _ZH and text.isascii():
            continue  # every _ZH form holds a CJK character
        for m in pattern.finditer(text):
            group = "qv" if m.groupdict().get("qv") is not None else "uv"
            value = m.group(group) if group == "qv" else _trim_unquoted(m.group(group))
            if _is_placeholder(value) or _looks_like_path_or_url(value) or len(value) < 6:
                continue
            name = (m.groupdict().get("name") or "").lower()
            if name.startswith(("key", "credential")) and not (
                _has_letters_and_digits(value) or (value.isdigit() and len(value) >= 12)
            ):
                continue  # "the key is well-known": a bare "key" needs a key-shaped value
            # Quoted, it is the value whatever it looks like ("the wifi password is 'correct
            # horse battery staple'"); bare, it must look like one (not "the token is expired").
            if group == "qv" or _secretish(value) or value.isdigit():
                out.append((m.start(group), m.start(group) + len(value), "assignment"))
    return out


def _prose_bare_spans(text: str, found: list[_Span]) -> list[_Span]:
    """`_PROSE_BARE` values that no other layer found: a provider rule on the same span
    ("Token d465..." is Kingfisher's curl auth header) says more, so this runs after it."""
    out: list[_Span] = []
    for m in _PROSE_BARE.finditer(text):
        value = _trim_unquoted(m.group("uv"))
        start, end = m.start("uv"), m.start("uv") + len(value)
        if _bare_secret_value(value) and not any(start < e and b < end for b, e, _ in found):
            out.append((start, end, "assignment"))
    return out


def _bare_secret_value(value: str) -> bool:
    """A value right after a secret word with nothing between must be one no word, name,
    version, path or placeholder could be: 8+ characters of three classes (lower, upper,
    digit, punctuation), or 12+ mixing letters and digits that are not an identifier."""
    if len(value) < 8 or _is_placeholder(value) or _looks_like_path_or_url(value):
        return False
    if _VERSION.match(value) or "@" in value or _name_like(value):
        return False
    if value.isalnum() and _camel_identifier(value):
        return False  # OAuth2ClientCredentials; a punctuated value is no identifier
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                   any(c.isdigit() for c in value), any(c in string.punctuation for c in value)))
    return classes >= 3 or (len(value) >= 12 and _has_letters_and_digits(value))


def _pair_spans(text: str) -> list[_Span]:
    """Values whose name is a tag, a sibling field, an argument or the command
    (``factbank.redact.pairs``), judged as an assignment would be. A value with a space in it
    is not taken from such a pair (``t("api_key", "API key")`` is a label)."""
    out: list[_Span] = []
    for name, value, start, quoted, prose in pairs.pairs(text):
        strength = _secret_name(name)
        if strength is None:
            continue
        if not quoted:
            value = _trim_unquoted(value)
        if not value or any(c.isspace() for c in value):
            continue
        if (strength == "weak" or prose) and not _key_like(value):
            continue
        if _accept_assignment(
            name, value, "=", quoted=True, spaced=False, spaced_after=False, standalone=True
        ):
            out.append((start, start + len(value), "assignment"))
    return out


def _keyword_plugin_spans(text: str) -> list[_Span]:
    """detect-secrets' KeywordDetector (quoted values in code), located in the text."""
    out: list[_Span] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        # (heuristic.is_indirect_reference is not applied: it is quadratic in the line length,
        # and every pattern used here requires a quoted literal, which a call is not.)
        if ("'" in line or '"' in line) and _KEYWORD_GATE.search(line):
            for value in set(_KEYWORD.analyze_string(line, _KEYWORD_REGEXES)):
                if not _keyword_value_ok(value, line):
                    continue
                for m in re.finditer(re.escape(value), line):
                    if _named_secret_literal(line, m.start(), m.end()):
                        out.append((offset + m.start(), offset + m.end(), "assignment"))
        offset += len(line)
    return out


def _named_secret_literal(line: str, start: int, end: int) -> bool:
    """KeywordDetector matches any name *containing* a keyword (``SECRET_CONTENT``,
    ``password_hash``, ``secretName``): keep literals whose name ends in one, and, behind a
    qualified name (``password_super_secure``), only values shaped like a key."""
    before = _NAME_BEFORE.search(line, 0, start)
    after = _NAME_AFTER.match(line, end)
    strengths = {_secret_name(m.group(1)) for m in (before, after) if m}
    if "strong" in strengths:
        return True
    return "weak" in strengths and _key_like(line[start:end])


def _key_like(value: str) -> bool:
    """A value that could only be key material, whatever names it: no spaces, 8+ characters
    of two or more symbol classes, and not an identifier made of words."""
    return (
        len(value) >= 8
        and not any(c.isspace() for c in value)
        and _secretish(value)
        and not _PLAIN_IDENTIFIER.match(value)
        and not _name_like(value)
        and not _camel_identifier(value)
    )


def _keyword_value_ok(value: str, line: str) -> bool:
    if len(value) < 4 or _is_placeholder(value) or _looks_like_path_or_url(value):
        return False
    if any(
        f(value)
        for f in (
            heuristic.is_templated_secret,
            heuristic.is_prefixed_with_dollar_sign,
            heuristic.is_sequential_string,
            heuristic.is_potential_uuid,
            heuristic.is_not_alphanumeric_string,
        )
    ):
        return False
    if re.fullmatch(r"[\w.$]+\(.*\)", value):
        return False  # a call: ``token := getToken()``
    # ``secretName: "db-credentials"`` names a secret; only password-ish lines take plain words.
    if re.fullmatch(r"[a-z]+(?:[-_.][a-z]+)*", value):
        return bool(re.search(r"pass|pwd|contrase", line, re.IGNORECASE))
    return True


def _high_entropy_spans(text: str, found: list[_Span]) -> list[_Span]:
    """Random-looking strings nobody labelled, minus the identifiers that merely look random."""
    out: list[_Span] = []
    for m in _CANDIDATE.finditer(text):
        start, end = m.span()
        if any(s <= start and end <= e for s, e, _ in found):
            continue
        token = m.group()
        if _url_component(text, start):
            continue
        if _is_random_secret(token, text[max(0, start - 48) : start]):
            out.append((start, end, "high_entropy"))
    return out


def _is_random_secret(token: str, before: str) -> bool:
    core = token.rstrip("=")
    if _UUID.search(core) or _ULID.match(core) or _SRI.match(core) or _example_value(core):
        return False
    if "/" in core and _path_like(core):
        return False
    # ``i-0abcd1234ef567890``, ``ami-0c55b159cbfafe1f0``: a hex id behind a short prefix.
    longest = max(re.split(r"[-_]", core), key=len)
    single_case = not (re.search(r"[a-f]", longest) and re.search(r"[A-F]", longest))
    if _HEX_RUN.match(longest) and len(longest) >= 0.6 * len(core) and single_case:
        # ``key-3f8a...`` (Mailgun), ``secret_9e51...``: the token's own prefix names it.
        if _SECRET_PREFIX.match(core[: core.find(longest)]):
            return len(longest) >= 16 and _HEX.calculate_shannon_entropy(longest) >= 3.0
        return _named_hex(longest, before)
    if _DIGEST_LABEL.search(before) or _PUBLIC_KEY_LABEL.search(before):
        return False
    if not _has_letters_and_digits(core) or _json_segment(core) or _encoded_text(core):
        return False
    if _name_like(core) or _camel_identifier(core):
        return False
    alnum = re.sub(r"[^A-Za-z0-9]", "", core)
    if len(alnum) < 16:
        return False
    probabilities = _class_probabilities(core)
    if _class_change_rate(alnum) < 0.4 * (1 - sum(p * p for p in probabilities)):
        return False
    # A uniformly random string shows close to log2(min(length, charset)) bits a symbol;
    # words and identifiers of the same length and charset fall well below 75% of that.
    floor = 0.75 * math.log2(min(len(core), _charset_size(core)))
    return _B64.calculate_shannon_entropy(core) >= floor


def _encoded_text(token: str) -> bool:
    """Base64 of plain text is not a secret: "VGhlIGRlcGxveSBydW5z..." decodes
    to "The deploy runs ...". Decoded (standard or URL-safe alphabet), it must be UTF-8 of
    printable text, at least 3/4 letters and spaces, with words (a space, or CJK), and hold no
    secret itself (redacted like any text), else the entropy rule goes on judging it."""
    body = token.rstrip("=")
    if len(body) < 16 or len(body) % 4 == 1:
        return False
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = (base64.urlsafe_b64decode(padded) if "-" in body or "_" in body
               else base64.b64decode(padded, validate=True))
        text = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    if not text.strip() or not all(c.isprintable() or c in "\n\t" for c in text):
        return False
    wordy = sum(c.isalpha() or c.isspace() for c in text)
    cjk = any("\u4e00" <= c <= "\u9fff" for c in text)
    if wordy < 0.75 * len(text) or not (cjk or len(text.split()) >= 3):
        return False
    return not _detect(text)


def _json_segment(token: str) -> bool:
    """A lone JWT header or payload (``eyJhbGciOiJIUzI1NiJ9``) is encoded JSON, not a key; a
    whole signed token is caught by the JWT plugin before this runs."""
    if not token.startswith("eyJ"):
        return False
    try:
        decoded = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    return decoded.startswith("{")


def _jwt_header(segment: str) -> bool:
    """A JWT's first segment decodes to a JSON object (``{"alg": ...}``)."""
    try:
        decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode()
        return isinstance(json.loads(decoded), dict)
    except (ValueError, UnicodeDecodeError):
        return False


def _class_probabilities(token: str) -> list[float]:
    """Share of lower/upper/digit symbols in a uniformly random string over the same charset;
    the class-change rate expected from such a string is ``1 - sum(p^2)``."""
    sizes = [
        n
        for n, present in (
            (26, any(c.islower() for c in token)),
            (26, any(c.isupper() for c in token)),
            (10, any(c.isdigit() for c in token)),
        )
        if present
    ]
    return [n / sum(sizes) for n in sizes]


def _charset_size(token: str) -> int:
    return (
        26 * any(c.islower() for c in token)
        + 26 * any(c.isupper() for c in token)
        + 10 * any(c.isdigit() for c in token)
        + sum(c in token for c in "+/-_")
    )


def _name_like(token: str) -> bool:
    """``api-7d9f8b6c5d-x2x4z``, ``checkout_v2_2024_05``: word parts plus short random-ish parts
    (a pod or release name). A secret behind a prefix (``whsec_<32 chars>``) has a long part."""
    if token.startswith("xn--"):
        return True  # punycode host label
    parts = [p for p in re.split(r"[-_.]", token) if p]
    if len(parts) < 2:
        return False
    words = [p for p in parts if _LOWER_WORD.match(p) and _pronounceable(p)]
    others = [p for p in parts if p not in words]
    return bool(words) and all(len(p) <= 12 for p in others)


def _pronounceable(word: str) -> bool:
    low = word.lower()
    vowels = sum(c in "aeiouy" for c in low)
    return vowels >= 0.2 * len(low) and not _CONSONANT_RUN.search(low)


def _named_hex(core: str, before: str) -> bool:
    """Hex is a secret only when a secret word, not a digest/commit label, sits right before."""
    if len(core) < 16 or _HEX.calculate_shannon_entropy(core) < 3.0:
        return False
    secret = list(_SECRET_CONTEXT.finditer(before))
    if not secret:
        return False
    digest = list(_DIGEST_CONTEXT.finditer(before))
    return not digest or digest[-1].start() < secret[-1].start()


def _camel_identifier(token: str) -> bool:
    """``Base64HighEntropyString``, ``OAuth2ClientCredentials``, ``Courier10PitchBT``: mixed
    case and digits, but made of pronounceable words, short acronyms and version digits. On
    random base62 strings of 20+ characters this says "identifier" well under 1% of the time."""
    if not (re.search(r"[a-z]", token) and re.search(r"[A-Z]", token)):
        return False
    pieces = _PIECE.findall(token)
    if not pieces:
        return False
    bad = 0
    for i, piece in enumerate(pieces):
        if not piece.isalpha() or (piece.isupper() and 1 < len(piece) <= 4):
            continue  # digits, acronyms
        if len(piece) == 1:
            bad += not (i + 1 < len(pieces) and pieces[i + 1].isdigit())  # V2, S3, K8s
        else:
            bad += not _pronounceable(piece)
    mean = sum(map(len, pieces)) / len(pieces)
    return bad <= max(1, 0.2 * len(pieces)) and mean >= 2.75


def _class_change_rate(s: str) -> float:
    def cls(c: str) -> int:
        return 0 if c.isdigit() else 1 if c.islower() else 2

    changes = sum(cls(a) != cls(b) for a, b in pairwise(s))
    return changes / max(1, len(s) - 1)


def _path_like(token: str) -> bool:
    """Mostly name-like segments (``matplotlib/tests/...``, ``/nix/store/<hash>-python3``);
    base64 also contains slashes, but between random segments."""
    segments = [s for s in token.split("/") if s]
    tame = sum(len(s) for s in segments if _TAME_SEGMENT.match(s))
    rooted = token.startswith(("/", "~/", "./", "../"))
    return tame >= (0.3 if rooted else 0.6) * sum(map(len, segments))


def _url_component(text: str, start: int) -> bool:
    """Inside a URL's host or path (query values are still scanned). Paths are left alone
    because a URL is usually the fact's source: a Google Docs id or a blob path looks random
    but is provenance, and redacting it would break the write gate's source location."""
    lo = max(0, start - 4096)  # bounded: a long line must not make this quadratic
    line_start = max(text.rfind("\n", lo, start), text.rfind(" ", lo, start), lo - 1) + 1
    prefix = text[line_start:start]
    return "://" in prefix and "?" not in prefix and "=" not in prefix


# --- value tests ----------------------------------------------------------------------------


def _is_secret_name(name: str) -> bool:
    """The name must *end* in a secret word (``DB_PASSWORD`` yes, ``PASSWORD_MIN_LENGTH`` no),
    and a bare ``key``/``pass`` glued to what precedes it must not be an English word that
    merely ends so (``monkey``, ``hotkey``, ``bypass``, ``compass``); config compounds
    (``dbpass``, ``sshkey``, ``GITHUBKEY``, ``rootpass``) are names."""
    low = name.lstrip("-").lower()
    return not _WORD_NOT_NAME.search(low)


# English words ending in "key" or "pass" that are not secret names.
_WORD_NOT_NAME = re.compile(
    r"(?:monkey|donkey|turkey|hockey|jockey|whiskey|lackey|turnkey|hotkey"
    r"|bypass|compass|impass|overpass|surpass|trespass|underpass)$"
)


def _secret_name(name: str) -> str | None:
    """``"strong"`` when the name ends in a secret word (``DB_PASSWORD``); ``"weak"`` when a
    secret word is followed by a qualifier that is not metadata (``password_super_secure``,
    ``apikey_myservice``, ``db_pass_prod``); None otherwise (``password_hash``,
    ``PASSWORD_MIN_LENGTH``, ``token_url``, ``secretName``)."""
    bare = name.lstrip("-@$")
    if _SECRET_NAME_END.search(bare) and _is_secret_name(bare):
        return "strong"
    last = None
    for m in _SECRET_WORD.finditer(bare):
        last = m
    if last is None:
        return None
    tail = bare[last.end() :].lstrip("_.-")
    if not tail or _METADATA_TAIL.match(tail) or not re.match(r"[A-Za-z0-9]", tail):
        return None
    return "weak"


def _accept_assignment(
    name: str,
    value: str,
    sep: str,
    *,
    quoted: bool,
    spaced: bool,
    spaced_after: bool,
    standalone: bool,
) -> bool:
    if len(value) < 4 or _is_placeholder(value) or _looks_like_path_or_url(value):
        return False
    if not any(c.isalnum() for c in value):
        return False  # punctuation only: ``password = ",.:-?!"`` is a separator or a mask
    if value.isdigit() and len(value) < 12:
        return False
    low = re.sub(r"[_.\-]", "", name.lower())
    if low.endswith(("key", "token")) and any(c.isspace() for c in value):
        return False  # key material has no spaces: ACCESS_KEY: "Get this from elsewhere"
    if low.endswith("key") and not low.endswith(_STRONG_KEYS):
        # Generic ``*_KEY`` (CACHE_KEY, SORT_KEY, PRIMARY_KEY, an XML ``key="Name1"``) needs a
        # key-shaped value: 16+ symbols, mixed case or digits, not an identifier of words.
        return (
            bool(_KEY_SHAPED.match(value))
            and (_has_letters_and_digits(value) or _mixed_case(value))
            and not _camel_identifier(value)
            and not _name_like(value)
        )
    if quoted or (sep in ("=", ":=", "=>", "==") and not spaced):
        return True  # a literal, or env style NAME=value
    if sep == ":" and not spaced_after:
        return False  # YAML needs ``key: value``; ``rails credentials:edit`` is a command
    if _PLAIN_IDENTIFIER.match(value):
        # ``token = created``, ``info, token = await ...`` are expressions; only a YAML line
        # ``password: swordfish`` makes a plain word a value.
        return sep == ":" and standalone
    # ``password = hunter2`` (ini), ``token: value`` mid-sentence: only secret-shaped values.
    return standalone or _secretish(value)


def _is_placeholder(value: str) -> bool:
    v = value.strip().strip("\"'`")
    if not v:
        return True
    low = v.lower()
    if low in _PLACEHOLDER_WORDS or low.startswith("[redacted"):
        return True
    if _TEMPLATE.fullmatch(v) or _FORMAT_SLOT.search(v) or v.startswith("!"):
        return True  # a slot, a format string ("prefix_{}", "%s"), a YAML tag (!Ref, !Sub)
    if "..." in v or "…" in v or _example_value(v):  # elided (``fb_...``), examples, masks
        return True
    if len(set(v)) == 1 or re.fullmatch(r"[*x•.\-_]+", low):
        return True
    if _REFERENCE.match(v) or _UPPER_SNAKE.match(v):  # settings.DB_PASSWORD, OPENAI_API_KEY
        return True
    return bool(re.match(r"^(?:os\.)?(?:environ|getenv|env|secrets?|vault)[.\[(]", v))


# A format string's slot: ``"prefix_{}".format(x)``, ``"{0}:{1}"``, ``"%s"``.
_FORMAT_SLOT = re.compile(r"\{\d*\}|%[sd]\b")

# A whole value that is a slot to fill, not a value: ``${DB_PASSWORD}``, ``$TOKEN``,
# ``%API_KEY%``, ``{{ vault_api_key }}``, ``#{secret}``, ``<your-token>``, ``[PASSWORD]``,
# ``{name: db, key: password}``. Only whole values: a password may contain braces.
_TEMPLATE = re.compile(
    r"\$\{[^}]*\}|\$\{\{.*\}\}|\$\(.*\)|\$[A-Za-z_][A-Za-z0-9_]*|\$\d+|%[A-Za-z_][A-Za-z0-9_]*%"
    r"|\{\{.*\}\}"
    r"|#\{[^}]*\}|<[^<>]*>|\[[A-Za-z_\- ]*\]|\{[^{}]*\}",
    re.DOTALL,
)

# Documentation and fixture values: AWS's ``AKIAIOSFODNN7EXAMPLE``, ``sk_live_xxxxxxxx``,
# ``ghp_****``, ``[Redacted]``. A random key holds none of these by chance (a 4-run of x/X in
# a 40-character base62 key: about 4 in 100,000).
_EXAMPLE_MARK = re.compile(
    r"EXAMPLE|[Ee]xample(?![.-]?(?:com|org|net)\b)|[xX]{4,}|\*{3,}|•{3,}|#{4,}|\.{3,}|…"
    r"|\[redacted|redacted\]|placeholder|your[_\-]?(?:api[_\-]?)?(?:key|token|secret|password)"
    r"|(?-i:fake|dummy)|insert[_\-]|[_\-]here\b|not[_\- ]?(?:a[_\- ]?)?real"
    r"|^my[_\-]?(?:api[_\-]?)?(?:key|token|secret|password|pass)$",
    re.IGNORECASE,
)
_CHAR_RUN = re.compile(r"(.)\1{7,}")
# Each alternative of _EXAMPLE_MARK holds one of these (lowercased); most values hold none,
# and ten substring tests cost less than one search of that case-insensitive alternation.
_EXAMPLE_TRIGGERS = (
    "real",
    "my",
    "xam",
    "xxxx",
    "***",
    "•••",
    "####",
    "...",
    "…",
    "redacted",
    "placeholder",
    "your",
    "fake",
    "dummy",
    "insert",
    "here",
)


def _example_value(value: str) -> bool:
    """An example or masked value, or one that is mostly a single repeated character
    (``AKIAZZZZZZZZZZZZZZZZ``, ``AGE-SECRET-KEY-1QQQQ...``)."""
    low = value.lower()
    if any(t in low for t in _EXAMPLE_TRIGGERS) and _EXAMPLE_MARK.search(value):
        return True
    if len(value) > 16 * 8 or not _CHAR_RUN.search(value):  # no run of 8, or too long for one
        return False
    longest = max(len(m.group()) for m in _CHAR_RUN.finditer(value))
    return longest * 2 >= len(value)


def _looks_like_path_or_url(value: str) -> bool:
    return value.startswith(("/", "~/", "./", "../")) or bool(
        re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://|^[A-Za-z]:\\", value)
    )


def _secretish(value: str) -> bool:
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(c in string.punctuation for c in value),
        )
    )
    return classes >= 2 or len(value) >= 16


def _mixed_case(value: str) -> bool:
    return any(c.islower() for c in value) and any(c.isupper() for c in value)


def _has_letters_and_digits(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c in string.ascii_letters for c in value)


def _trim_unquoted(value: str) -> str:
    """Drop sentence punctuation that the value regex swallowed."""
    return value.rstrip(".,;:!?") if len(value.rstrip(".,;:!?")) >= 4 else value


# --- applying -------------------------------------------------------------------------------


def _priority(kind: str) -> int:
    if kind.startswith("kf_"):
        return _SCANNER_PRIORITY
    return _GENERIC_PRIORITY.get(kind, 0)


def _merge(spans: Iterable[_Span]) -> list[_Span]:
    """Union overlapping spans; the merged span takes the most specific kind."""
    merged: list[_Span] = []
    for start, end, kind in sorted(spans):
        if end <= start:
            continue
        if merged and start < merged[-1][1]:
            s, e, k = merged[-1]
            merged[-1] = (s, max(e, end), k if _priority(k) <= _priority(kind) else kind)
        else:
            merged.append((start, end, kind))
    return merged


def _propagatable_values(text: str, spans: list[_Span]) -> dict[str, str]:
    """Secret values distinctive enough to replace wherever else they appear; short or plain
    words (``postgres`` as a password) are not, or every mention of postgres would vanish."""
    out: dict[str, str] = {}
    for start, end, kind in spans:
        value = text[start:end]
        if len(value) >= 6 and _secretish(value) and "\n" not in value:
            out[value] = kind
    return out


def _occurrences(text: str, values: Mapping[str, str]) -> list[_Span]:
    """Whole-token occurrences of each value (``str.find``: linear, unlike a regex per value)."""
    out: list[_Span] = []
    for value, kind in values.items():
        start = text.find(value)
        while start >= 0:
            end = start + len(value)
            if not (_alnum_at(text, start - 1) or _alnum_at(text, end)):
                out.append((start, end, kind))
            start = text.find(value, start + 1)
    return out


def _alnum_at(text: str, i: int) -> bool:
    return 0 <= i < len(text) and text[i].isascii() and text[i].isalnum()


def _apply(text: str, spans: list[_Span]) -> str:
    parts: list[str] = []
    pos = 0
    for start, end, kind in spans:
        parts.append(text[pos:start])
        parts.append(f"[REDACTED:{kind}]")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)
