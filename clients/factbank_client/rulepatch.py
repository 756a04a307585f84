"""`factbank rules propose`: a rule candidate as a change to a rule file that a person merges
(the rule-promotion gate's second gate). Never applied:

* a patch (default): `git diff`-style, written to `.git/factbank/rule-<id>.patch` (inside the
  git directory, so it is not an untracked file in the work tree) or `--out`;
* a branch (`--branch`): one commit on top of HEAD, built with git's plumbing through a
  temporary index (`GIT_INDEX_FILE`): `hash-object`, `read-tree`, `update-index`,
  `write-tree`, `commit-tree`, `update-ref`. The work tree, the real index, HEAD and the rule
  file are not touched (tests/integration/test_cli_staleness.py compares their bytes).

The proposed text is the claim as one list item appended to the file, with where it held:
`- Use pnpm, never npm (factbank #4: held in github.com/acme/api, github.com/globex/web)`.

The rule file is read through `safefs.read` (inside the repository, no link out of it) and
the patch written through `safefs.write` (a fresh temp file renamed into place: a planted
`.git/factbank/rule-4.patch -> ~/precious` link is refused, never written through).
"""

from __future__ import annotations

import difflib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from factbank_client import safefs
from factbank_client.errors import ProposeError, UnsafePath
from factbank_client.staleness.fingerprint import git
from factbank_common.inert import inert

RULE_HEADING = "## Rules promoted from factbank"


def rule_line(candidate: dict) -> str:
    """The rule as ONE Markdown list item: every piece of bank text goes through `inert`, so a
    content or project holding newlines, HTML comments or fences cannot add lines of its own
    to the rule file."""
    fact = candidate["fact"]
    projects = ", ".join(inert(p, 200, markdown=True) for p in candidate.get("projects", []))
    content = inert(" ".join(str(fact["content"]).split()), markdown=True)
    return f"- {content} (factbank #{int(fact['id'])}: held in {projects})"


def proposed_text(old: str, line: str) -> str:
    """`old` with `line` appended under RULE_HEADING (added once, at the end)."""
    text = old
    if text and not text.endswith("\n"):
        text += "\n"
    if RULE_HEADING not in text:
        text += ("\n" if text else "") + RULE_HEADING + "\n\n"
    return text + line + "\n"


def _target(root: Path, to: str) -> tuple[str, str]:
    """(the rule file's text, its path relative to the root), read only inside the root."""
    try:
        real = safefs.inside(root, to)
        rel = real.relative_to(root.resolve()).as_posix()
        old = safefs.read(root, to)[1].decode("utf-8")
    except FileNotFoundError:
        old = ""
    except UnsafePath as exc:
        raise ProposeError(f"--to: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProposeError(f"cannot read {to}: {exc}") from None
    return old, rel


def _git_env(root: Path, *args: str, env: dict[str, str], input: bytes | None = None) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], input=input, capture_output=True,
                          env={**os.environ, **env}, timeout=30, check=False)
    if done.returncode != 0:
        raise ProposeError(f"git {args[0]} failed: "
                           f"{done.stderr.decode('utf-8', 'replace').strip()[:300]}")
    return done.stdout.decode("utf-8", "replace").strip()


def propose(root: Path, candidate: dict, to: str, *, branch: str | None = None,
            out: str | None = None) -> dict[str, Any]:
    """Write the proposal; returns {"kind": "patch"|"branch", "path"|"branch", "commit"?,
    "show": the diff or `git show` text, "note": how a person applies it}."""
    fid = int(candidate["fact"]["id"])
    old, rel = _target(root, to)
    line = rule_line(candidate)
    if line in old:
        raise ProposeError(f"{rel} already has this rule: {line}")
    new = proposed_text(old, line)
    diff = "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"a/{rel}" if old else "/dev/null", tofile=f"b/{rel}"))
    header = f"diff --git a/{rel} b/{rel}\n" + ("new file mode 100644\n" if not old else "")
    patch = header + diff
    if branch is None:
        gitdir = git(root, "rev-parse", "--absolute-git-dir")
        default = Path(gitdir) / "factbank" / f"rule-{fid}.patch" if gitdir else \
            root / f"factbank-rule-{fid}.patch"
        path = Path(out) if out else default
        try:
            safefs.write(path, patch)
        except UnsafePath as exc:
            raise ProposeError(str(exc)) from None
        return {"kind": "patch", "path": str(path), "file": rel, "show": patch,
                "note": f"wrote {path}; nothing applied. To adopt the rule: "
                        f"git apply {path} (then review and commit it)"}
    name = branch or f"factbank/rule-{fid}"
    if git(root, "rev-parse", "--verify", "-q", f"refs/heads/{name}") is not None:
        raise ProposeError(f"branch {name} exists already: delete it or pass --branch NAME")
    head = git(root, "rev-parse", "--verify", "-q", "HEAD")
    if head is None:
        raise ProposeError("the repository has no commit yet: a branch needs a parent")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git_env(root, "read-tree", head, env=env)
        blob = _git_env(root, "hash-object", "-w", "--stdin", env=env, input=new.encode())
        _git_env(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
        tree = _git_env(root, "write-tree", env=env)
        message = (f"Propose a rule from factbank #{fid} for {rel}\n\n{line[2:]}\n\n"
                   "Proposed by `factbank rules propose`: never applied automatically; merge "
                   "it if the team agrees.\n")
        commit = _git_env(root, "commit-tree", tree, "-p", head, env=env,
                          input=message.encode())
        _git_env(root, "update-ref", f"refs/heads/{name}", commit, "", env=env)
    show = _git_env(root, "show", "--stat", "--patch", "--format=commit %H%n%n    %s%n",
                    commit, env={})
    return {"kind": "branch", "branch": name, "commit": commit, "file": rel, "show": show + "\n",
            "note": f"made branch {name} ({commit[:12]}) with one commit; nothing applied. "
                    f"To adopt the rule: git merge {name}"}
