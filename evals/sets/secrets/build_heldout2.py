"""Build ``heldout2.jsonl``: a second held-out corpus from scanner fixtures not used before.

Run from the repository root, with snapshots of the four source repositories on disk::

    python evals/sets/secrets/build_heldout2.py --secretlint PATH --whispers PATH \\
        --ripsecrets PATH --trivy PATH

Paths may be bare git directories or work trees (read with ``git show``). The output is
deterministic for a given set of commits. Nothing here is imported by the product.

Why a second corpus: the first one's held-out split (``corpus.jsonl``) was read while
redaction was tuned in its second round, so it stopped being held out. This one was built, and
its rows checked for correct *labels*, before any change to redaction; its misses were not
looked at until the changes were done (README.md beside this file says what was measured
when). Every row is labelled by the same rules as ``corpus.jsonl`` (``build_corpus._label``:
a fixture secret whose value is a placeholder is a look-alike, a fixture negative holding a
random credential-shaped token is ``random``), after each source's own label:

* secretlint ``packages/@secretlint/secretlint-rule-*/test/snapshots/*/output.json``: the
  reviewed snapshot of what each rule reports on its ``sourceContent``. A reported range is a
  secret (the text is its whole lines, the value the range); every line of a snapshot that
  reports nothing is a look-alike. Left out: file-policy rules that report a file, not a value
  (``no-dotenv``, ``no-homedir``, ``no-k8s-kind-secret``), the user-pattern, comment-filter and
  example rules, presets (copies of the rules' snapshots), "ok" snapshots whose
  ``.secretlintrc.json`` switches detection off or allows values, and findings that the rule
  itself names an identifier (AWS account id, Azure tenant and client id: factbank keeps
  identifiers).
* whispers (Skyscanner) ``tests/fixtures``: files split into ``Compliant`` and
  ``Noncompliant`` sections. A noncompliant line holding the marker ``hardcoded`` (or base64
  of it) is a secret whose value is that token, as whispers' own test asserts; noncompliant
  lines of the files whispers tests by key (``test_detection_by_key``) are secrets when their
  key is one it expects; a compliant line is a look-alike. Other lines carry no label.
* ripsecrets ``test/one_per_line/*`` (each line one secret), ``test/one_per_file/*`` (each
  file one secret) and ``test/none`` (each line a look-alike).
* trivy ``pkg/fanal/secret/testdata`` with the expected findings of ``scanner_test.go``:
  for built-in rules only, each expected finding's lines are a secret (the value is what the
  masked ``Match`` hides); every line of a file whose test expects no finding is a look-alike.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("build_corpus", HERE / "build_corpus.py")
assert _spec and _spec.loader
_bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bc)
Source = _bc.Source
_label = _bc._label

SPLIT = "heldout2"

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]+-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]+-----")
_COMMENT_ONLY = re.compile(r"^\s*(?:#|//|<!--|;|/\*|\*)")
_STRUCTURAL = re.compile(r"^\s*[\[\]{}(),<>/\\\"'`:-]*\s*$|^\s*</?[A-Za-z_:.\-]+>\s*$")


def _row(text: str, expected: str, value: str | None, family: str, rule: str, fixture: str,
         src: Source, path: str) -> dict:
    """build_corpus's row of a literal fixture, with the fixture's own verdict word (ok/ng,
    compliant/noncompliant, tp/fp)."""
    return _bc._row(text, expected, value, family, rule, "literal fixture", src, path,
                    fixture=fixture)


def _units(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the text's lines, a PEM block (BEGIN..END) kept as one unit."""
    out: list[tuple[int, int]] = []
    pos = 0
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        start = pos
        line = lines[i]
        pos += len(line)
        i += 1
        if _PEM_BEGIN.search(line) and not _PEM_END.search(line):
            while i < len(lines):
                nxt = lines[i]
                pos += len(nxt)
                i += 1
                if _PEM_END.search(nxt):
                    break
        out.append((start, pos))
    return out


def _labelled_text(text: str) -> bool:
    """A line worth a row: not blank, a comment, or bare structure (``{``, ``</root>``)."""
    stripped = text.strip()
    return bool(stripped) and not _COMMENT_ONLY.match(stripped) and not _STRUCTURAL.match(stripped)


# --- secretlint ---------------------------------------------------------------------------

_SECRETLINT_SKIP = {
    "no-dotenv",
    "no-homedir",
    "no-k8s-kind-secret",
    "pattern",
    "filter-comments",
    "example",
}
_IDENTIFIER_MESSAGES = {"AWSAccountID", "AzureTenantId", "AzureClientId"}


def build_secretlint(src: Source) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    stats = {"snapshots": 0, "skipped_snapshots": 0, "identifier_findings": 0}
    names = src.files("packages/@secretlint", "output.json")
    for path in names:
        m = re.match(r"packages/@secretlint/secretlint-rule-([^/]+)/test/snapshots/([^/]+)/", path)
        if not m:
            continue
        rule, case = m.groups()
        if rule in _SECRETLINT_SKIP or rule.startswith("preset-"):
            continue
        folder = path.rsplit("/", 1)[0]
        snap = json.loads(src.read(path))
        content = snap.get("sourceContent")
        messages = snap.get("messages", [])
        rc = f"{folder}/.secretlintrc.json"
        has_rc = rc in src.files(folder, ".secretlintrc.json")
        if not isinstance(content, str) or (not messages and has_rc) or case.startswith("options"):
            stats["skipped_snapshots"] += 1
            continue
        stats["snapshots"] += 1
        family = f"secretlint:{rule}"
        units = _units(content)
        if not messages:
            for start, end in units:
                text = content[start:end].rstrip("\r\n")
                if _labelled_text(text):
                    rows.append(_row(text, "lookalike", None, family, case, "ok", src, folder))
            continue
        for msg in messages:
            if msg.get("messageId") in _IDENTIFIER_MESSAGES:
                stats["identifier_findings"] += 1
                continue
            s, e = msg["range"]
            value = content[s:e]
            first = next(u for u in units if u[0] <= s < u[1])
            last = next(u for u in units if u[0] < e <= u[1])
            text = content[first[0] : last[1]].rstrip("\r\n")
            rows.append(
                _row(text, "secret", value, family, msg.get("messageId", case), "ng", src, folder)
            )
    return rows, stats


# --- whispers -----------------------------------------------------------------------------

_SECTION = re.compile(
    r"^\s*(?:#|//|<!--|<|\"|')?\s*((?:non|in)[-_ ]?compliant|compliant)\b", re.IGNORECASE
)
# The marker's token, without the separators around a value (``user:hardcoded@host``).
_SEP = r"\s\"'`<>=:@/,;()\[\]{}"
_HARDCODED = re.compile(
    rf"(?<![^{_SEP}])(?<!<)(?<!</)[^{_SEP}]*hardcoded[^{_SEP}]*+(?![\"']?\s*[:=])",
    re.IGNORECASE,
)
_B64_TOKEN = re.compile(r"[A-Za-z0-9+/_\-]{8,}={0,2}")
_KEY_OF_LINE = re.compile(
    r"^\s*-?\s*(?:<(?P<tag>[\w.\-]+)[\s>]|[\"']?(?P<key>[\w.\-]+)[\"']?\s*[:=])"
)


def _whispers_by_key(src: Source) -> dict[str, set[str]]:
    """The fixture files whispers' own test checks by key, and the keys it expects (the
    parametrize table right above ``def test_detection_by_key``)."""
    test = src.read("tests/unit/test_secrets.py")
    head = test[: test.find("def test_detection_by_key")]
    table = head[head.rfind("@pytest.mark.parametrize") :]
    return {
        m.group(1): set(re.findall(r"\"([^\"]+)\"", m.group(2)))
        for m in re.finditer(r"\(\"([^\"]+)\",\s*\[([^\]]*)\]\)", table)
    }


def _hardcoded_value(line: str) -> str | None:
    # The last one that is not a key (``01_hardcoded_password: hardcoded0``).
    found = [m.group() for m in _HARDCODED.finditer(line)]
    if found:
        return found[-1]
    for t in _B64_TOKEN.finditer(line):
        token = t.group()
        try:
            decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=False)
        except (binascii.Error, ValueError):
            continue
        if b"hardcoded" in decoded.lower():
            return token
    return None


_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key|auth|cred", re.IGNORECASE)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _with_context(lines: list[str], i: int, floor: int) -> str:
    """A line, or, when it names no secret itself (``- "x"``, ``value: x`` under ``- key:
    password``), the line with the lines above it up to its parent (the nearest line less
    indented), as a reader of the file sees it."""
    line = lines[i]
    km = _KEY_OF_LINE.match(line)
    key = km and (km.group("tag") or km.group("key"))
    if key and _SECRET_KEY.search(key):
        return line
    j = i - 1
    while j > floor and _indent(lines[j]) >= _indent(line):
        j -= 1
    if j <= floor or _indent(lines[j]) >= _indent(line):
        return line
    return "\n".join(x for x in lines[j : i + 1] if x.strip())


def build_whispers(src: Source) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    stats = {"files": 0, "unlabelled_lines": 0}
    by_key = _whispers_by_key(src)
    for path in src.files("tests/fixtures", ""):
        name = path.removeprefix("tests/fixtures/")
        try:
            text = src.read(path)
        except (UnicodeDecodeError, OSError, subprocess.CalledProcessError):
            continue
        lines = text.splitlines()
        if not any(_SECTION.match(line) for line in lines) or name.startswith("excluded."):
            continue  # excluded.*: "compliant" there means "excluded by the test's config"
        stats["files"] += 1
        stem = Path(name).name.lstrip(".")
        for _ in range(2):  # beans.xml.dist -> beans
            stem = re.sub(
                r"\.(?:json|xml|yml|dist|template|py2?|go|js|java|php|html|sh|txt)$", "", stem
            )
        family = f"whispers:{stem}"
        section: str | None = None
        floor = -1
        keys = by_key.get(name, set())
        for i, line in enumerate(lines):
            sec = _SECTION.match(line)
            if sec:
                section = "ok" if sec.group(1).lower() == "compliant" else "non"
                floor = i
                continue
            if section is None or not _labelled_text(line):
                continue
            row_text = _with_context(lines, i, floor)
            if section == "ok":
                rows.append(_row(row_text, "lookalike", None, family, name, "compliant", src, path))
                continue
            value = _hardcoded_value(line)
            km = _KEY_OF_LINE.match(line)
            key = km and (km.group("tag") or km.group("key"))
            if value is None and key in keys and km:
                after = line[km.end() :].strip().strip("\"'\\ ")
                if len(after) >= 8:
                    rows.append(
                        _row(row_text, "secret", None, family, name, "noncompliant", src, path)
                    )
                    continue
            if value is None:
                stats["unlabelled_lines"] += 1
                continue
            rows.append(_row(row_text, "secret", value, family, name, "noncompliant", src, path))
    return rows, stats


# --- ripsecrets ---------------------------------------------------------------------------


def build_ripsecrets(src: Source) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    for path in src.files("test", ""):
        text = src.read(path)
        name = path.removeprefix("test/")
        if name.startswith("one_per_file/"):
            family = f"ripsecrets:{Path(name).name}"
            rows.append(_row(text.rstrip("\n"), "secret", None, family, name, "tp", src, path))
            continue
        expected = "lookalike" if name == "none" else "secret"
        family = f"ripsecrets:{Path(name).name}"
        for line in text.splitlines():
            if line.strip():
                rows.append(
                    _row(
                        line,
                        expected,
                        None,
                        family,
                        name,
                        "fp" if expected == "lookalike" else "tp",
                        src,
                        path,
                    )
                )
    return rows, {}


# --- trivy --------------------------------------------------------------------------------

_TRIVY_CONFIGS = {"skip-test.yaml", "config.yaml"}
# Built-in rules whose match trivy itself calls public, not a credential (factbank keeps it).
_TRIVY_PUBLIC = {"stripe-publishable-token"}
_GO_STR = r'"(?:\\.|[^"\\])*"|`[^`]*`'
_GO_REPEAT = re.compile(r"strings\.Repeat\((" + _GO_STR + r"),\s*(\d+)\)")


def _go_string(lit: str) -> str:
    return json.loads(lit) if lit.startswith('"') else lit.strip("`")


def _go_concat(expr: str, env: dict[str, str]) -> str | None:
    """A Go string expression of literals, ``strings.Repeat`` and known names joined by +."""
    out = []
    for m in re.finditer(r"\s*(" + _GO_STR + r"|strings\.Repeat\([^)]*\)|\w+)\s*(\+|$)", expr):
        part = m.group(1)
        rep = _GO_REPEAT.fullmatch(part)
        if rep:
            out.append(_go_string(rep.group(1)) * int(rep.group(2)))
        elif part[0] in '"`':
            out.append(_go_string(part))
        elif part in env:
            out.append(env[part])
        else:
            return None
    return "".join(out)


def _masked_value(line: str, match: str) -> str | None:
    """What ``*`` hides in trivy's masked ``Match`` of ``line`` (the longest hidden run)."""
    parts = re.split(r"(\*+)", match)
    pattern = "".join(f"(.{{{len(p)}}})" if p.startswith("*") else re.escape(p) for p in parts if p)
    m = re.search(pattern, line)
    if not m or not m.groups():
        return None
    return max(m.groups(), key=len)


def build_trivy(src: Source) -> tuple[list[dict], dict]:
    test = src.read("pkg/fanal/secret/scanner_test.go")
    env = {
        m.group(1): _go_string(m.group(2)) * int(m.group(3))
        for m in re.finditer(r"\n\t(\w+) := strings\.Repeat\((" + _GO_STR + r"),\s*(\d+)\)", test)
    }
    wants: dict[str, dict] = {}
    for m in re.finditer(r"\n\t(\w+) := types\.SecretFinding\{(.*?)\n\t\}", test, re.S):
        body = m.group(2)
        rid = re.search(r'RuleID:\s*"([^"]+)"', body)
        sl = re.search(r"StartLine:\s*(\d+)", body)
        el = re.search(r"EndLine:\s*(\d+)", body)
        mt = re.search(r"\n\t\tMatch:\s*([^\n]*),\n", body)
        if rid and sl and el:
            wants[m.group(1)] = {
                "rule": rid.group(1),
                "start": int(sl.group(1)),
                "end": int(el.group(1)),
                "match": _go_concat(mt.group(1), env) if mt else None,
            }
    # openAIFinding(rule, title, severity, n): line 1, all n characters masked
    for m in re.finditer(r'\n\t(\w+) := openAIFinding\("([^"]+)",[^)]*?(\d+)\)', test):
        wants[m.group(1)] = {
            "rule": m.group(2),
            "start": 1,
            "end": 1,
            "match": "*" * int(m.group(3)),
        }
    rows: list[dict] = []
    stats = {"cases": 0}
    seen_files: set[str] = set()
    for m in re.finditer(r'\{\s*name:\s*"([^"]+)",(.*?)\n\t\t\},', test, re.S):
        name, body = m.groups()
        cp = re.search(r'configPath:\s*filepath\.Join\("testdata", "([^"]+)"\)', body)
        ip = re.search(
            r'inputFilePath:\s*(?:filepath\.Join\("testdata", "([^"]+)"\)|"testdata/([^"]+)")',
            body,
        )
        if not cp or not ip or cp.group(1) not in _TRIVY_CONFIGS or name.startswith("skip"):
            continue
        file = ip.group(1) or ip.group(2)
        if file in seen_files or file.startswith("secret."):
            continue  # secret.txt/.md exercise the custom test rules, not built-in ones
        fl = re.search(r"Findings:\s*\[\]types\.SecretFinding\{(.*?)\}", body, re.S)
        if fl and "RuleID" in fl.group(1):
            continue  # findings written inline (chunking and encoding tests): not parsed
        refs = re.findall(r"\b(want\w+)\b", fl.group(1)) if fl else []
        findings = [
            wants[r]
            for r in refs
            if r in wants
            and not wants[r]["rule"].startswith("rule")
            and wants[r]["rule"] not in _TRIVY_PUBLIC
        ]
        if refs and not findings:
            continue
        path = f"pkg/fanal/secret/testdata/{file}"
        try:
            text = src.read(path)
        except (UnicodeDecodeError, OSError, subprocess.CalledProcessError):  # binary, missing
            continue
        seen_files.add(file)
        stats["cases"] += 1
        lines = text.split("\n")
        family = "trivy:" + Path(file).stem
        if not findings:
            for line in lines:
                line = line.rstrip("\r")
                if _labelled_text(line):
                    rows.append(_row(line, "lookalike", None, family, name, "fp", src, path))
            continue
        units = _units(text)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)
        for f in findings:
            chunk = "\n".join(x.rstrip("\r") for x in lines[f["start"] - 1 : f["end"]])
            value = _masked_value(chunk, f["match"]) if f["match"] else None
            # the whole PEM block when the finding is its body
            s0, e0 = offsets[f["start"] - 1], offsets[f["end"]] - 1
            unit = next((u for u in units if u[0] <= s0 < u[1]), None)
            if unit and unit[1] >= e0:
                chunk = text[unit[0] : unit[1]].rstrip("\r\n")
            if value is not None and not value.strip():
                value = None
            rows.append(_row(chunk, "secret", value, family, f["rule"], "tp", src, path))
    return rows, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secretlint", type=Path, required=True)
    ap.add_argument("--whispers", type=Path, required=True)
    ap.add_argument("--ripsecrets", type=Path, required=True)
    ap.add_argument("--trivy", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=HERE / "heldout2.jsonl")
    args = ap.parse_args(argv)
    parts = [
        ("secretlint", build_secretlint(Source(args.secretlint, "secretlint/secretlint", "MIT"))),
        ("whispers", build_whispers(Source(args.whispers, "Skyscanner/whispers", "Apache-2.0"))),
        ("ripsecrets", build_ripsecrets(Source(args.ripsecrets, "sirwart/ripsecrets", "MIT"))),
        ("trivy", build_trivy(Source(args.trivy, "aquasecurity/trivy", "Apache-2.0"))),
    ]
    seen: set[tuple[str, str, str | None]] = set()
    rows = []
    for _, (part_rows, _) in parts:
        for row in part_rows:
            key = (row["text"], row["expected"], row["value"])
            if key in seen:
                continue
            seen.add(key)
            row["split"] = SPLIT
            rows.append(row)
    summary = _bc.write_rows(rows, args.out)
    summary.update({name: {"rows": len(r), **s} for name, (r, s) in parts})
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
