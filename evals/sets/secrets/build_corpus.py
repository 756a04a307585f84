"""Build ``corpus.jsonl`` from public secret-scanner fixtures (used as data only).

Run from the repository root, with snapshots of the two source repositories on disk::

    python evals/sets/secrets/build_corpus.py \\
        --gitleaks /path/to/gitleaks.git --detect-secrets /path/to/detect-secrets.git

Both paths may be bare git directories (read with ``git show``) or work trees. The output is
deterministic for a given pair of commits (fixed seed). Nothing here is imported by the
product; the committed ``corpus.jsonl`` is what the eval and the test read.

Sources (see README.md beside this file for licences and the labelling rules):

* gitleaks ``cmd/generate/config/rules/*.go``: each rule's true-positive (``tps``) and
  false-positive (``fps``) samples. Literal samples are taken as written. Samples the Go code
  generates (``secrets.NewSecret(regex)``, ``utils.GenerateSampleSecrets(id, value)``) are
  generated here from the same regexes with a fixed seed; a generated value is embedded in
  fact-style sentences (what an agent would write into a fact), not in gitleaks' 30 code
  templates.
* detect-secrets ``tests/plugins/*_test.py``: ``(line, should_flag)`` parametrize tables whose
  entries are string literals or simple ``.format`` / ``+`` expressions of module constants.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]

from factbank.redact.gitleaks_rules import go_regex_source

HERE = Path(__file__).resolve().parent
SEED = 20260601

# Families the outside probe named (item 9). We read their failures before tuning,
# so they are dev by construction; every other family is split by a hash of its name.
SEEN_FAMILIES = {
    "gitleaks:azure",
    "gitleaks:aws",
    "gitleaks:sourcegraph",
    "gitleaks:intra42",
    "gitleaks:curl",
}
HELD_OUT_SHARE = 0.35

# A fixture's "secret" that is really a placeholder is relabelled a look-alike (the product
# must keep those). Objective tests on the secret value, applied before any tuning.
_PLACEHOLDER_VALUE = re.compile(
    r"EXAMPLE|example(?!\.(?:com|org|net))|[xX]{4,}|\*{3,}|placeholder|PLACEHOLDER|your[_-]|YOUR[_-]|redacted|REDACTED"
)


def _placeholder_value(value: str) -> bool:
    """A mask or example, by the rule above, or a value that is mostly one repeated character
    (``AKIAZZZZZZZZZZZZZZZZ``); a real token that merely starts with a run (Twitter's
    ``AAAA...`` bearer tokens) keeps most of its length random and stays a secret."""
    longest = max((len(m.group()) for m in re.finditer(r"(.)\1*", value)), default=0)
    return bool(_PLACEHOLDER_VALUE.search(value)) or longest * 2 >= len(value) > 0


# --- reading the sources ------------------------------------------------------------------


class Source:
    def __init__(self, path: Path, repo: str, license_: str) -> None:
        self.path = path
        self.repo = repo
        self.license = license_
        self.bare = (path / "HEAD").exists() and not (path / ".git").exists()
        self.commit = self._git("rev-parse", "HEAD").strip()

    def _git(self, *args: str) -> str:
        git_dir = ["--git-dir", str(self.path)] if self.bare else ["-C", str(self.path)]
        return subprocess.run(
            ["git", *git_dir, *args], check=True, capture_output=True, text=True
        ).stdout

    def files(self, folder: str, suffix: str) -> list[str]:
        names = self._git("ls-tree", "-r", "--name-only", self.commit, folder).splitlines()
        return sorted(n for n in names if n.endswith(suffix))

    def read(self, name: str) -> str:
        return self._git("show", f"{self.commit}:{name}")


# --- a tiny Go expression reader (enough for the rule files) ------------------------------

_GO_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<lc>//[^\n]*)|(?P<bc>/\*.*?\*/)|(?P<raw>`[^`]*`)"""
    r"""|(?P<str>"(?:\\.|[^"\\\n])*")|(?P<chr>'(?:\\.|[^'\\\n])*')"""
    r"""|(?P<op>:=|\.\.\.|[(){}\[\],+=])|(?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"""
    r"""|(?P<num>\d+)|(?P<other>.)""",
    re.S,
)


def _go_unquote(lit: str) -> str:
    if lit.startswith("`"):
        return lit[1:-1]
    body = lit[1:-1]
    out: list[str] = []
    i = 0
    simple = {
        "n": "\n",
        "t": "\t",
        "r": "\r",
        '"': '"',
        "\\": "\\",
        "'": "'",
        "a": "\a",
        "b": "\b",
        "f": "\f",
        "v": "\v",
    }
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif e == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        elif e == "U":
            out.append(chr(int(body[i + 2 : i + 10], 16)))
            i += 10
        else:  # octal
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
    return "".join(out)


def _go_tokens(src: str) -> list[tuple[str, str]]:
    out = []
    for m in _GO_TOKEN.finditer(src):
        kind = m.lastgroup or "other"
        if kind in ("ws", "lc", "bc"):
            continue
        if kind in ("raw", "str"):
            out.append(("str", _go_unquote(m.group())))
        else:
            out.append((kind, m.group()))
    return out


class _Unsupported(Exception):
    pass


class _Value:
    """A Go string value; ``secret`` is the part known to be the credential, if known."""

    def __init__(self, text: str, secret: str | None = None, generated: bool = False) -> None:
        self.text = text
        self.secret = secret
        self.generated = generated


class _GoEval:
    """Evaluates the handful of expression shapes the rule files use for their samples."""

    def __init__(self, tokens: list[tuple[str, str]], rng: random.Random) -> None:
        self.t = tokens
        self.i = 0
        self.rng = rng

    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.t[self.i + k] if self.i + k < len(self.t) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise _Unsupported(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def skip_balanced(self) -> None:
        depth = 0
        while self.peek()[0] != "eof":
            v = self.take()[1]
            if v in "({[":
                depth += 1
            elif v in ")}]":
                depth -= 1
                if depth <= 0:
                    return

    # expression -> list of samples (a call may produce several)
    def expr(self) -> list[_Value]:
        parts = [self.term()]
        while self.peek()[1] == "+":
            self.take()
            parts.append(self.term())
        if len(parts) == 1:
            return parts[0]
        if any(len(p) != 1 for p in parts):
            raise _Unsupported("concatenating lists")
        text = "".join(p[0].text for p in parts)
        return [_Value(text, None, any(p[0].generated for p in parts))]

    def args(self) -> list[list[_Value]]:
        self.take("(")
        out = []
        while self.peek()[1] != ")":
            out.append(self.expr())
            if self.peek()[1] == "...":
                self.take()
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return out

    def term(self) -> list[_Value]:
        kind, value = self.peek()
        if kind == "str":
            self.take()
            return [_Value(value)]
        if kind != "id":
            raise _Unsupported(f"token {value!r}")
        self.take()
        if self.peek()[1] != "(":
            raise _Unsupported(f"identifier {value}")
        name = value
        if name == "secrets.NewSecret":
            (pattern,) = self.args()
            return [_Value(generate(pattern[0].text, self.rng), None, True)]
        if name in _PATTERN_HELPERS:
            a = self.args()
            return [_Value(_PATTERN_HELPERS[name](*(x[0].text for x in a)))]
        if name == "utils.GenerateSampleSecret":
            ident, secret = self.args()
            s = secret[0]
            return [_Value(f'{ident[0].text}_api_token = "{s.text}"', s.text, s.generated)]
        if name == "utils.GenerateSampleSecrets":
            ident, secret = self.args()
            s = secret[0]
            return [_Value("", s.text, s.generated)]  # text filled by fact templates
        if name == "fmt.Sprintf":
            a = self.args()
            fmt, rest = a[0][0].text, [x[0].text for x in a[1:]]
            if re.search(r"%[^s%]", fmt):
                raise _Unsupported("Sprintf verb")
            return [_Value(fmt.replace("%%", "\0") % tuple(rest), None, True)]
        if name == "strings.Repeat":
            a = self.args()
            return [_Value(a[0][0].text * int(a[1][0].text))]
        raise _Unsupported(f"call {name}")


_PATTERN_HELPERS = {
    "utils.Numeric": lambda n: f"[0-9]{{{n}}}",
    "utils.Hex": lambda n: f"[a-f0-9]{{{n}}}",
    "utils.AlphaNumeric": lambda n: f"[a-z0-9]{{{n}}}",
    "utils.AlphaNumericExtendedShort": lambda n: f"[a-z0-9_-]{{{n}}}",
    "utils.AlphaNumericExtended": lambda n: f"[a-z0-9=_\\-]{{{n}}}",
    "utils.AlphaNumericExtendedLong": lambda n: f"[a-z0-9\\/=_\\+\\-]{{{n}}}",
    "utils.Hex8_4_4_4_12": lambda: "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
}


def _go_samples(body: str, var: str, rng: random.Random) -> tuple[list[_Value], int]:
    """Every sample assigned or appended to ``var`` in a function body; and how many
    elements could not be evaluated."""
    toks = _go_tokens(body)
    out: list[_Value] = []
    skipped = 0
    i = 0
    while i < len(toks) - 2:
        if toks[i] == ("id", var) and toks[i + 1][1] in (":=", "="):
            ev = _GoEval(toks, rng)
            ev.i = i + 2
            value = ev.peek()[1]
            try:
                if value == "[" and ev.peek(1)[1] == "]":
                    ev.take("[")
                    ev.take("]")
                    ev.take()  # string
                    ev.take("{")
                    skipped += _elements(ev, out, "}", ",")
                elif value == "append":
                    ev.take()
                    ev.take("(")
                    ev.take()  # the slice itself
                    skipped += _elements(ev, out, ")", "...")
                else:
                    out.extend(ev.expr())
            except (_Unsupported, ValueError, IndexError, TypeError):
                skipped += 1
            i = max(ev.i, i + 1)
        else:
            i += 1
    return out, skipped


def _elements(ev: _GoEval, out: list[_Value], close: str, suffix: str) -> int:
    """Evaluate the comma-separated elements up to `close` into `out` (each may end with
    `suffix`: "," in a slice literal, "..." in append); an element that cannot be evaluated
    is skipped to its end and counted. Returns the count."""
    skipped = 0
    while ev.peek()[1] != close:
        if ev.peek()[1] == ",":
            ev.take()
            continue
        start = ev.i
        try:
            out.extend(ev.expr())
        except (_Unsupported, ValueError, IndexError, TypeError):
            skipped += 1
            ev.i = start
            _skip_element(ev)
        if ev.peek()[1] == suffix:
            ev.take()
    return skipped


def _skip_element(ev: _GoEval) -> None:
    depth = 0
    while ev.peek()[0] != "eof":
        v = ev.peek()[1]
        if v in "({[":
            depth += 1
        elif v in ")}]":
            if depth == 0:
                return
            depth -= 1
        elif v == "," and depth == 0:
            return
        ev.take()


# --- generating strings from a regex (Go RE2 syntax is close enough to Python's) ----------


def generate(pattern: str, rng: random.Random) -> str:
    pattern = pattern.replace("\\z", "$")
    tree = sre_parse.parse(pattern)
    for _ in range(50):  # like gitleaks' tests: a sample must look random, so retry dull ones
        s = _gen(tree, rng)
        if len(s) < 12 or (any(c.isdigit() for c in s) and any(c.isalpha() for c in s)):
            return s
    return s


def _gen(items, rng: random.Random) -> str:
    out = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "IN":
            out.append(rng.choice(_charset(av)))
        elif name == "ANY":
            out.append(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789"))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            hi = lo + 4 if hi > 1000 else hi
            for _ in range(rng.randint(lo, hi) if hi > lo else lo):
                out.append(_gen(sub, rng))
        elif name == "SUBPATTERN":
            out.append(_gen(av[-1], rng))
        elif name == "BRANCH":
            out.append(_gen(rng.choice(av[1]), rng))
        elif name == "CATEGORY":
            out.append(rng.choice(_category(str(av))))
        elif name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue
        elif name == "NOT_LITERAL":
            out.append(rng.choice([c for c in "abcdefghijk0123456789" if ord(c) != av]))
        else:
            raise ValueError(name)
    return "".join(out)


def _category(name: str) -> str:
    if "DIGIT" in name:
        return "0123456789"
    if "WORD" in name:
        return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
    if "SPACE" in name:
        return " "
    return "abcdefghijklmnopqrstuvwxyz"


def _charset(items) -> str:
    chars: list[str] = []
    negate = False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            chars.append(chr(av))
        elif name == "RANGE":
            chars.extend(chr(c) for c in range(av[0], av[1] + 1))
        elif name == "CATEGORY":
            chars.extend(_category(str(av)))
    if negate:
        return "".join(c for c in "abcdefghijklmnopqrstuvwxyz0123456789" if c not in chars)
    return "".join(chars)


# --- locating the credential inside a literal sample --------------------------------------


def _load_rule_regexes(src: Source) -> dict[str, tuple[re.Pattern[str], int]]:
    import tomllib

    config = tomllib.loads(src.read("config/gitleaks.toml"))
    out = {}
    for rule in config.get("rules", []):
        pattern = rule.get("regex")
        if not pattern:
            continue
        try:
            compiled = re.compile(_go_to_python_regex(pattern))
        except re.error:
            continue
        out[rule["id"]] = (compiled, int(rule.get("secretGroup", 0)))
    return out


def _go_to_python_regex(p: str) -> str:
    # The product's translation (POSIX classes, \z), plus the one class only the full catalog
    # uses; each class is a distinct literal, so replacing it last gives the same text.
    p = go_regex_source(p).replace("[:punct:]", r"!-/:-@\[-`{-~")
    # Go allows a global (?i) anywhere; Python wants it first.
    if "(?i)" in p and not p.startswith("(?i)"):
        p = "(?i)" + p.replace("(?i)", "")
    return p


def _secret_in(text: str, rule: tuple[re.Pattern[str], int] | None) -> str | None:
    if rule is None:
        return None
    pattern, group = rule
    m = pattern.search(text)
    if not m:
        return None
    if group and group <= (m.lastindex or 0):
        value = m.group(group)
    elif m.lastindex:
        value = next((g for g in m.groups() if g), m.group())
    else:
        value = m.group()
    return value or None


# --- fact templates for generated values ---------------------------------------------------

_FACT_TEMPLATES = (
    "The staging {name} key is {s}; rotate it after the demo.",
    "export {NAME}_API_KEY={s}",
    'ci/config.yaml sets {name}_token: "{s}" for the deploy job.',
    "{name} 的访问令牌是 {s}，只给 CI 用。",
    '{name}Token = "{s}"  # from the vendor dashboard',
    "Ops said the {name} credential in Vault is {s} (rotated Monday).",
)


def _fact_rows(ident: str, value: str, rng: random.Random) -> list[str]:
    name = re.sub(r"[^A-Za-z0-9]+", "_", ident).strip("_").lower() or "service"
    picks = rng.sample(_FACT_TEMPLATES, 2)
    return [t.format(name=name, NAME=name.upper(), s=value) for t in picks]


# --- building ------------------------------------------------------------------------------


def _split(family: str) -> str:
    if family in SEEN_FAMILIES:
        return "dev"
    h = int(hashlib.sha256(family.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "heldout" if h < HELD_OUT_SHARE else "dev"


# A scanner's false-positive fixture often says "not *this* rule's format" (wrong prefix,
# wrong length) about a string that is still a random credential-shaped token, or that is
# another rule's secret (detect-secrets' GitLab tests list a GitHub token as a negative).
# Those are labelled "random": not a look-alike a memory must keep, not a known secret either.
# The test is on the fixture alone (gitleaks' generic-rule entropy floor, 3.5 bits a symbol),
# not on anything factbank does.
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-.~=]{20,}")


def _entropy(s: str) -> float:
    from collections import Counter
    from math import log2

    n = len(s)
    return -sum(c / n * log2(c / n) for c in Counter(s).values())


def _random_token(text: str) -> bool:
    for m in _TOKEN.finditer(text):
        tok = m.group().strip("=.-_")
        if len(tok) < 20 or _placeholder_value(tok):
            continue
        has_digit = any(c.isdigit() for c in tok)
        has_alpha = any(c.isalpha() for c in tok)
        if has_digit and has_alpha and _entropy(tok) >= 3.5:
            return True
    return False


def _label(expected: str, value: str | None, text: str) -> tuple[str, str | None]:
    """The relabelling rules: a fixture 'secret' whose value is a placeholder is a look-alike;
    a fixture 'false positive' holding a random credential-shaped token is 'random'."""
    if expected == "secret":
        probe = value if value is not None else text
        if _placeholder_value(probe):
            return "lookalike", "fixture true positive with a placeholder value"
    elif _random_token(text):
        return "random", "fixture false positive holding a random-looking token"
    return expected, None


def _row(text: str, expected: str, value: str | None, family: str, rule: str, origin: str,
         src: Source, path: str, *, fixture: str | None = None) -> dict:
    """One corpus row: the fixture's text and its label (`_label` may relabel it); `fixture`
    is the source's own verdict word (default: tp for a secret, fp for a look-alike)."""
    label, note = _label(expected, value, text)
    return {
        "text": text,
        "expected": label,
        "value": value if label == "secret" else None,
        "family": family,
        "rule": rule,
        "fixture": fixture or ("tp" if expected == "secret" else "fp"),
        "origin": origin,
        "relabel": note,
        "source": f"{src.repo}@{src.commit[:12]}:{path}",
        "license": src.license,
    }


def build_gitleaks(src: Source) -> tuple[list[dict], dict]:
    rng = random.Random(SEED)
    regexes = _load_rule_regexes(src)
    rows: list[dict] = []
    stats = {"skipped_expressions": 0, "unlocated_secrets": 0}
    for path in src.files("cmd/generate/config/rules", ".go"):
        text = src.read(path)
        provider = Path(path).stem
        family = f"gitleaks:{provider}"
        for body in re.split(r"\nfunc ", text)[1:]:
            rule_id = re.search(r'RuleID:\s*"([^"]+)"', body)
            if not rule_id:
                continue
            rid = rule_id.group(1)
            for var, expected in (("tps", "secret"), ("fps", "lookalike")):
                values, skipped = _go_samples(body, var, rng)
                stats["skipped_expressions"] += skipped
                for v in values:
                    if v.text == "" and v.secret is not None:
                        texts = _fact_rows(rid.split("-")[0], v.secret, rng)
                        origin = "generated value in fact templates"
                    else:
                        texts = [v.text]
                        origin = "generated fixture" if v.generated else "literal fixture"
                    for t in texts:
                        if not t.strip():
                            continue
                        secret = v.secret if expected == "secret" else None
                        if expected == "secret" and secret is None:
                            secret = _secret_in(t, regexes.get(rid))
                            if secret is None:
                                stats["unlocated_secrets"] += 1
                        rows.append(_row(t, expected, secret, family, rid, origin, src, path))
    return rows, stats


# What evaluating a table entry of a detect-secrets test may raise: the entry is skipped.
_PY_EVAL_ERRORS = (_Unsupported, TypeError, KeyError, IndexError, ValueError, AttributeError)


def _py_eval(node: ast.AST, env: dict[str, object]) -> object:
    """Literal strings, module constants, ``.format``, ``%``, ``+`` and slices; nothing else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unsupported(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _py_eval(node.left, env) + _py_eval(node.right, env)  # type: ignore[operator]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _py_eval(node.left, env) * _py_eval(node.right, env)  # type: ignore[operator]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _py_eval(node.left, env) % _py_eval(node.right, env)  # type: ignore[operator]
    if isinstance(node, ast.Tuple):
        return tuple(_py_eval(e, env) for e in node.elts)
    if isinstance(node, ast.Subscript):
        base = _py_eval(node.value, env)
        sl = node.slice
        if isinstance(sl, ast.Slice):
            lo = _py_eval(sl.lower, env) if sl.lower else None
            hi = _py_eval(sl.upper, env) if sl.upper else None
            return base[lo:hi]  # type: ignore[index]
        return base[_py_eval(sl, env)]  # type: ignore[index]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_py_eval(node.operand, env)  # type: ignore[operator]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        base = _py_eval(node.func.value, env)
        args = [_py_eval(a, env) for a in node.args]
        kwargs = {k.arg: _py_eval(k.value, env) for k in node.keywords if k.arg}
        return base.format(*args, **kwargs)  # type: ignore[union-attr]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append(str(_py_eval(v.value, env)))
        return "".join(parts)
    raise _Unsupported(type(node).__name__)


def build_detect_secrets(src: Source) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    stats = {"skipped_entries": 0}
    for path in src.files("tests/plugins", "_test.py"):
        plugin = Path(path).stem.removesuffix("_test")
        if plugin in ("base", "ip_public", "high_entropy_strings"):
            # base: plugin machinery; ip_public: an IP is not a secret for us (and not a
            # credential); high_entropy_strings: tables of bare random strings with no context.
            continue
        family = f"detect-secrets:{plugin}"
        tree = ast.parse(src.read(path))
        env: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    try:
                        env[target.id] = _py_eval(node.value, env)
                    except _PY_EVAL_ERRORS:
                        pass
        for node in ast.walk(tree):
            tables: list[ast.AST] = []
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize":
                if len(node.args) >= 2:
                    tables.append(node.args[1])
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
                name = getattr(node.targets[0], "id", "")
                if name.endswith("_CASES") or name.endswith("_TEST_CASES"):
                    tables.append(node.value)
            for table in tables:
                if isinstance(table, ast.Name):
                    table = next(
                        (
                            n.value
                            for n in ast.walk(tree)
                            if isinstance(n, ast.Assign)
                            and getattr(n.targets[0], "id", None) == table.id
                        ),
                        table,
                    )
                if not isinstance(table, ast.List):
                    continue
                for entry in table.elts:
                    if not isinstance(entry, ast.Tuple) or len(entry.elts) < 2:
                        continue
                    try:
                        line = _py_eval(entry.elts[0], env)
                        flag = _py_eval(entry.elts[1], env)
                    except _PY_EVAL_ERRORS:
                        stats["skipped_entries"] += 1
                        continue
                    if not isinstance(line, str) or not line.strip() or len(line) > 4000:
                        continue
                    if isinstance(flag, bool):
                        expected, value = ("secret" if flag else "lookalike"), None
                    elif isinstance(flag, str):
                        expected, value = "secret", flag
                    elif flag is None:
                        expected, value = "lookalike", None
                    else:
                        continue
                    rows.append(_row(line, expected, value, family, plugin, "literal fixture",
                                     src, path))
    return rows, stats



def write_rows(rows: list[dict], out: Path) -> dict:
    """Number the rows, write them as sorted-key JSON lines, and count them by label (both
    corpus builders write the same way, so the files diff cleanly between rebuilds)."""
    for n, row in enumerate(rows):
        row["id"] = n
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    return {
        "rows": len(rows),
        "secret": sum(r["expected"] == "secret" for r in rows),
        "lookalike": sum(r["expected"] == "lookalike" for r in rows),
        "random": sum(r["expected"] == "random" for r in rows),
        "families": len({r["family"] for r in rows}),
        "relabelled": sum(bool(r["relabel"]) for r in rows),
    }

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gitleaks", type=Path, required=True)
    ap.add_argument("--detect-secrets", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=HERE / "corpus.jsonl")
    args = ap.parse_args(argv)
    gl_rows, gl_stats = build_gitleaks(Source(args.gitleaks, "gitleaks/gitleaks", "MIT"))
    ds_rows, ds_stats = build_detect_secrets(
        Source(args.detect_secrets, "Yelp/detect-secrets", "Apache-2.0")
    )
    seen: set[tuple[str, str]] = set()
    rows = []
    for row in gl_rows + ds_rows:
        key = (row["text"], row["expected"])
        if key in seen:
            continue
        seen.add(key)
        row["split"] = _split(row["family"])
        rows.append(row)
    summary = write_rows(rows, args.out)
    summary.update({
        "heldout": sum(r["split"] == "heldout" for r in rows),
        "gitleaks": gl_stats,
        "detect_secrets": ds_stats,
    })
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
