"""Name/value pairs whose name and value are apart: the shapes of config files and commands.

The assignment rule in ``redaction`` reads ``NAME=value``, ``name: value`` and ``"name":
"value"``, where the name sits right before its value. Config formats and command lines also
put a credential where the name is a tag, a sibling field, an earlier argument or the command
itself:

* XML elements and key/value attributes: ``<password>v</password>``,
  ``<entry key="api.token">v</entry>``, ``<add key="DbPassword" value="v"/>``,
  ``<property name="password" value="v"/>`` (Java, .NET, Maven, Spring configs);
* name/value siblings: ``- name: DB_PASSWORD`` then ``value: v`` (Kubernetes env, Helm),
  ``{"name": "API_TOKEN", "value": "v"}``, ``ParameterKey``/``ParameterValue``
  (CloudFormation), ``<key>password</key><value>v</value>`` (XML properties, plists);
* lists under a secret's name: ``passwords:`` then ``- v`` lines, ``"tokens": ["v", ...]``
  (a plural name is read as its singular);
* several names assigned at once: ``user, password = "admin", "v"``, Go's
  ``const a, b string = "x", "y"``;
* call arguments: ``getenv("DB_PASSWORD", "v")`` (a default), ``define('DB_PASSWORD', 'v')``,
  ``setProperty("password", "v")``, ``headers.put("X-Api-Key", "v")``;
* Dockerfile's legacy ``ENV DB_PASSWORD v``;
* SQL: ``IDENTIFIED BY 'v'``, ``WITH PASSWORD 'v'``;
* password flags of common commands: ``mysql -u root -pv``, ``sshpass -p v``,
  ``redis-cli -a v``, ``docker login -u bot -p v`` (and podman, nerdctl, helm, oras);
* a user and a password side by side: ``auth=("admin", "v")``, ``HTTPBasicAuth("admin",
  "v")``, ``.netrc``'s ``machine h login u password v``;
* instructions: ``set DB_PASSWORD to v``, ``export API_TOKEN as v`` (prose: the value must
  look like a secret, or "set the password to expire" would lose a word).

Each yields ``(name, value, start, quoted, prose)``; ``redaction`` decides, with the same tests
as for an assignment (placeholders, templates, paths, the name's strength), whether the value
is a secret. Every pattern starts with a literal or is gated by one, so a text without ``<``,
``",``, ``ENV``, ``value`` or the command names costs a few substring checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

Pair = tuple[str, str, int, bool, bool]  # name, value, start of value, quoted, prose

_XML_ELEMENT = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:\-]{0,60})(?P<attrs>\s[^<>]{0,300})?>"
    r"(?P<v>[^<>\n]{1,300})</(?P=tag)\s*>"
)
_XML_NAME_ATTR = re.compile(r"\b(?:key|name|id)\s*=\s*[\"']([^\"'<>\n]{1,80})[\"']", re.I)
_XML_KEY_VALUE = re.compile(
    r"\b(?:key|name)\s*=\s*(?P<q>[\"'])(?P<name>[^\"'<>\n]{1,80})(?P=q)\s+"
    r"value\s*=\s*(?P<q2>[\"'])(?P<v>[^\"'\n]{0,300})(?P=q2)",
    re.I,
)
_SIBLINGS = re.compile(
    r"[\"']?(?:name|key|parameterkey)[\"']?\s*:\s*(?P<q>[\"']?)(?P<name>[\w.\-]{1,80})(?P=q)"
    r"\s*(?:,\s*|\n[ \t]*-?[ \t]*)[\"']?(?:value|parametervalue)[\"']?\s*:[ \t]*"
    r"(?:(?P<q2>[\"'])(?P<qv>[^\"'\n]{0,300})(?P=q2)|(?P<uv>[^\s\"'#,}][^\n,}#]{0,300}))",
    re.I,
)
_XML_KEY_SIBLING = re.compile(
    r"<key>(?P<name>[^<>\n]{1,80})</key>\s{0,200}<(?P<vt>value|string|val)>"
    r"(?P<v>[^<>\n]{1,300})</(?P=vt)>",
    re.I,
)
_YAML_LIST = re.compile(
    r"(?m)^(?P<indent>[ \t]*)[\"']?(?P<name>[\w.\-]{1,80})[\"']?[ \t]*:[ \t]*\n"
    r"(?P<items>(?:(?P=indent)[ \t]*-[ \t]+[^\n]*(?:\n|$)){1,50})"
)
_YAML_ITEM = re.compile(
    r"-[ \t]+(?:(?P<q>[\"'])(?P<qv>[^\"'\n]{1,300})(?P=q)|(?P<uv>[^\s\"'#:][^\n#:]{0,300}?))"
    r"[ \t]*(?:\n|$)"
)
_INLINE_LIST = re.compile(
    r"[\"']?(?P<name>[\w.\-]{1,80})[\"']?[ \t]*[:=][ \t]*\[(?P<items>[^\[\]]{1,3000})\]"
)
_QUOTED = re.compile(r"(?P<q>[\"'])(?P<v>[^\"'\n]{1,300})(?P=q)")
_TUPLE = re.compile(
    r"(?P<names>[A-Za-z_][\w.]{0,80}(?:[ \t]*,[ \t]*[A-Za-z_][\w.]{0,80}){1,8})[ \t]*"
    r"(?:[A-Za-z_][\w\[\]]{0,40}[ \t]*)?(?::=|=)[ \t]*"
    r"(?P<values>[\"'][^\"'\n]{0,300}[\"'](?:[ \t]*,[ \t]*[\"'][^\"'\n]{0,300}[\"']){1,8})"
)
_CALL_ARGS = re.compile(
    r"(?P<q>[\"'])(?P<name>[\w.\-]{1,80})(?P=q)\s*,\s*(?P<q2>[\"'])(?P<v>[^\"'\n]{1,300})(?P=q2)"
)
_DOCKER_ENV = re.compile(
    r"(?m)^[ \t]*ENV[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]{1,300})(?P=q)|(?P<uv>[^\s=\"'][^\s]*))[ \t]*$"
)
_SQL = re.compile(
    r"(?i)\b(?:identified[ \t]+by|(?:with[ \t]+)?(?:encrypted[ \t]+)?password)[ \t]+"
    r"'(?P<v>[^'\n]{1,200})'"
)
_SET_TO = re.compile(
    r"(?i)\b(?:set|export|change|rotate|update)[ \t]+(?:the[ \t]+)?(?P<name>[A-Za-z_][\w.\-]{1,80})"
    r"[ \t]+(?:to|as)[ \t]+(?:(?P<q>[\"'`])(?P<qv>[^\"'`\n]{1,300})(?P=q)|(?P<uv>[^\s\"'`,;]+))"
)
_USER_AND_PASSWORD = re.compile(
    r"(?i)\b(?:auth|basic_?auth|http_?basic_?auth|credentials?)[ \t]*[=(][ \t]*\(?[ \t]*"
    r"(?P<q1>[\"'])[^\"'\n]{1,80}(?P=q1)[ \t]*,[ \t]*(?P<q>[\"'])(?P<v>[^\"'\n]{1,300})(?P=q)"
)
_NETRC = re.compile(
    r"(?i)\bmachine[ \t]+\S+\s+login[ \t]+\S+\s+password[ \t]+(?P<q>[\"']?)(?P<v>[^\s\"']+)(?P=q)"
)
_QV = r"(?P<q>[\"']?)(?P<v>[^\s\"']+)(?P=q)"
_FLAGS = (
    # mysql/mysqldump: -p glued to the password, next to a -u user
    (
        re.compile(r"(?<!\S)-p(?P<q>[\"']?)(?P<v>[^\s\"'\-][^\s\"']*)(?P=q)"),
        re.compile(r"(?<!\S)-u"),
    ),
    (re.compile(r"(?<!\S)sshpass[ \t]+-p[ \t]*" + _QV), None),
    (re.compile(r"(?<!\S)redis-cli\b[^\n]*?[ \t]-a[ \t]+" + _QV), None),
    (
        re.compile(
            r"(?<!\S)(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]+registry)?|oras)"
            r"[ \t]+login\b[^\n]*?[ \t](?:-p|--password)[ \t]+" + _QV
        ),
        None,
    ),
)


def _singular(name: str) -> str:
    """``passwords`` -> ``password``, ``api_keys`` -> ``api_key``; ``pass`` stays."""
    plural = name[-1:] in "sS" and name[-2:-1] not in "sS" and len(name) > 3
    return name[:-1] if plural else name


def pairs(text: str) -> Iterator[Pair]:
    if "<" in text and ">" in text:
        yield from _xml(text)
    low = text.lower()
    if "\n" in text and "-" in text:
        for m in _YAML_LIST.finditer(text):
            name = _singular(m.group("name"))
            for item in _YAML_ITEM.finditer(m.group("items")):
                quoted = item.group("qv") is not None
                group = "qv" if quoted else "uv"
                at = m.start("items") + item.start(group)
                yield name, item.group(group).rstrip(), at, quoted, False
    if "[" in text:
        for m in _INLINE_LIST.finditer(text):
            name = _singular(m.group("name"))
            for item in _QUOTED.finditer(m.group("items")):
                yield name, item.group("v"), m.start("items") + item.start("v"), True, False
    if "," in text and "=" in text:
        for m in _TUPLE.finditer(text):
            names = [n.strip() for n in m.group("names").split(",")]
            values = list(_QUOTED.finditer(m.group("values")))
            if len(names) == len(values):
                for name, v in zip(names, values, strict=True):
                    yield name, v.group("v"), m.start("values") + v.start("v"), True, False
    if "value" in low:
        for m in _SIBLINGS.finditer(text):
            quoted = m.group("qv") is not None
            value = m.group("qv") if quoted else m.group("uv").rstrip()
            yield m.group("name"), value, m.start("qv" if quoted else "uv"), quoted, False
    if '",' in text or "'," in text:
        for m in _CALL_ARGS.finditer(text):
            yield m.group("name"), m.group("v"), m.start("v"), True, False
        for m in _USER_AND_PASSWORD.finditer(text):
            yield "password", m.group("v"), m.start("v"), True, False
    if "machine" in low:
        for m in _NETRC.finditer(text):
            yield "password", m.group("v"), m.start("v"), bool(m.group("q")), False
    if "ENV" in text:
        for m in _DOCKER_ENV.finditer(text):
            quoted = m.group("qv") is not None
            group = "qv" if quoted else "uv"
            yield m.group("name"), m.group(group), m.start(group), quoted, False
    if " to " in low or " as " in low:
        for m in _SET_TO.finditer(text):
            quoted = m.group("qv") is not None
            group = "qv" if quoted else "uv"
            yield m.group("name"), m.group(group), m.start(group), quoted, not quoted
    if "password" in low or "identified" in low:
        for m in _SQL.finditer(text):
            yield "password", m.group("v"), m.start("v"), True, False
    if "-p" in text or "-a" in text:
        for pattern, needs in _FLAGS:
            for m in pattern.finditer(text):
                lo = max(0, m.start() - 512)  # bounded: one long line stays linear
                line = text[max(lo, text.rfind("\n", lo, m.start()) + 1) : m.start()]
                if needs is not None and not needs.search(line):
                    continue
                yield "password", m.group("v"), m.start("v"), bool(m.group("q")), False


def _xml(text: str) -> Iterator[Pair]:
    for m in _XML_ELEMENT.finditer(text):
        raw = m.group("v")
        value = raw.strip()
        if not value:
            continue
        start = m.start("v") + (len(raw) - len(raw.lstrip()))
        yield _singular(m.group("tag")), value, start, True, False
        attrs = m.group("attrs") or ""
        for a in _XML_NAME_ATTR.finditer(attrs):
            yield a.group(1), value, start, True, False
    for m in _XML_KEY_VALUE.finditer(text):
        yield m.group("name"), m.group("v"), m.start("v"), True, False
    for m in _XML_KEY_SIBLING.finditer(text):
        yield m.group("name"), m.group("v").strip(), m.start("v"), True, False
