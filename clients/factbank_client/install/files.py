"""Format-keeping edits of the harnesses' own files, for `factbank install`
(docs/principles.md#installers-respect-the-users-files).

The installer only ever touches what it owns, and finds it again by a marker, never by an
exact path (factbank may be reinstalled from another venv):

* hook handlers whose command runs `factbank_client/hooks.py` (or `-m factbank_client.hooks`);
* an MCP server entry named `factbank` that runs `factbank ... mcp`;
* an instruction block between `<!-- factbank:begin ... -->` and `<!-- factbank:end -->`.

JSON files are rewritten with the indentation, key order, trailing newline and escaping they
had; TOML goes through tomlkit (comments, order and spacing kept). Each edit reports the
containers it had to create (e.g. `hooks` / `hooks.Stop`) so uninstall can remove exactly
those again, and nothing the user made.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HOOK_MARKER = "factbank_client.hooks"  # `python -m factbank_client.hooks` (older installs)
HOOK_SCRIPT_MARKER = "factbank_client/hooks.py"  # `python -I -S .../factbank_client/hooks.py`
BLOCK_BEGIN = "<!-- factbank:begin (managed by `factbank install`; edits inside are replaced) -->"
BLOCK_END = "<!-- factbank:end -->"
# Ours only between the exact delimiter lines install writes, each a whole line (a
# file whose text merely mentions `<!-- factbank:begin -->` is the user's, never cut out).
_BLOCK_RE = re.compile(r"^" + re.escape(BLOCK_BEGIN) + r"\n.*?^" + re.escape(BLOCK_END)
                       + r"[ \t]*(?:\n|\Z)", re.S | re.M)

Path_ = tuple[str, ...]


# --- JSON with its style ----------------------------------------------------------------------


@dataclass(frozen=True)
class JsonStyle:
    indent: str | None = "  "
    newline: bool = True
    ascii: bool = False


def json_style(text: str) -> JsonStyle:
    """How an existing file writes JSON: indent unit (spaces or tab, None when one line),
    trailing newline, \\u escapes."""
    body = text.strip()
    if "\n" not in body:
        indent = None if body not in ("", "{}") else "  "
    else:
        m = re.search(r"\n([ \t]+)\S", body)
        indent = m.group(1) if m else "  "
    return JsonStyle(indent=indent, newline=text.endswith("\n") or not text,
                     ascii=bool(re.search(r"\\u[0-9a-fA-F]{4}", text)))


def load_json(text: str | None) -> tuple[dict[str, Any], JsonStyle]:
    if text is None or not text.strip():
        return {}, JsonStyle()
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the file does not hold a JSON object")
    return data, json_style(text)


def dump_json(data: Any, style: JsonStyle) -> str:
    if style.indent is None:
        out = json.dumps(data, ensure_ascii=style.ascii)
    else:
        out = json.dumps(data, indent=style.indent, ensure_ascii=style.ascii)
    return out + ("\n" if style.newline else "")


def ensure(obj: dict, path: Path_, factory: type, created: list[Path_]) -> Any:
    """`obj[path]`, creating missing containers (recorded in `created`)."""
    cur: Any = obj
    for i, key in enumerate(path):
        if key not in cur:
            cur[key] = factory() if i == len(path) - 1 else {}
            created.append(path[: i + 1])
        cur = cur[key]
    return cur


def prune_created(obj: dict, created: Iterable[Sequence[str]]) -> None:
    """Delete the containers the installer created, deepest first, if they are empty now."""
    for path in sorted((tuple(p) for p in created), key=len, reverse=True):
        parent: Any = obj
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent and parent[path[-1]] in ({}, []):
            del parent[path[-1]]


# --- hook handlers ----------------------------------------------------------------------------


_EVENT = re.compile(r"^[a-z]+(?:-[a-z]+)*$")
_PYTHON = re.compile(r"^(?:python|pypy)[0-9.]*(?:\.exe)?$", re.I)  # the interpreter runs it
_PY_FLAGS = frozenset({"-I", "-S", "-E", "-s", "-B"})
# The harnesses whose hook command names them after the event (their payloads need
# translating, and all of them set CLAUDE_PROJECT_DIR: installer_gemini, installer_copilot).
_HARNESS_ARG = frozenset({"gemini", "qwen", "copilot", "opencode"})


def is_our_handler(handler: Any) -> bool:
    """A handler whose command *runs* factbank's hook (`PYTHON [-I -S] .../factbank_client/
    hooks.py EVENT [HARNESS]`, or `PYTHON -m factbank_client.hooks EVENT` from older
    installs), not one that merely mentions it (`echo factbank_client/hooks.py`): only those
    are replaced or removed."""
    if not isinstance(handler, dict):
        return False
    command = str(handler.get("command", "")).replace("\\", "/")
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if len(argv) >= 4 and argv[-1] in _HARNESS_ARG and _EVENT.match(argv[-2]):
        argv = argv[:-1]  # `hooks.py EVENT gemini`: the harness named after the event
    if len(argv) < 3 or not _EVENT.match(argv[-1]) or not _PYTHON.match(argv[0].rsplit("/")[-1]):
        return False
    middle = argv[1:-1]
    if middle[-2:] == ["-m", HOOK_MARKER]:
        return set(middle[:-2]) <= _PY_FLAGS
    script = middle[-1]
    return set(middle[:-1]) <= _PY_FLAGS and (
        script == HOOK_SCRIPT_MARKER or script.endswith("/" + HOOK_SCRIPT_MARKER))


def set_hooks(data: dict, handlers: dict[str, dict], created: list[Path_],
              matchers: dict[str, str] | None = None) -> None:
    """Put our handler for each event in `data["hooks"]`: replace ours in place (keeping its
    group's position, so Codex's trust keys of other hooks do not move), drop duplicates,
    else append one new group at the end, with the event's matcher (`matchers`) if it has
    one. A group holding only our handler gets the matcher too; a group we share with the
    user's handlers keeps theirs."""
    hooks = ensure(data, ("hooks",), dict, created)
    matchers = matchers or {}
    for event, handler in handlers.items():
        groups = ensure(data, ("hooks", event), list, created)
        placed = False
        new_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = []
                for h in group["hooks"]:
                    if not is_our_handler(h):
                        kept.append(h)
                    elif not placed:
                        kept.append(dict(handler))
                        placed = True
                if not kept and group["hooks"]:
                    continue  # a group only our duplicates were in
                group["hooks"] = kept
                if event in matchers and kept and all(is_our_handler(h) for h in kept):
                    group["matcher"] = matchers[event]
            new_groups.append(group)
        if not placed:
            new_groups.append({**({"matcher": matchers[event]} if event in matchers else {}),
                               "hooks": [dict(handler)]})
        hooks[event] = new_groups


def remove_hooks(data: dict) -> bool:
    """Remove our handlers everywhere (and groups/event lists left empty by that)."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        new_groups = []
        touched = False
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not is_our_handler(h)]
                if len(kept) != len(group["hooks"]):
                    touched = True
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            new_groups.append(group)
        changed = changed or touched
        if touched and not new_groups:
            del hooks[event]
        else:
            hooks[event] = new_groups
    return changed


def our_handlers(data: dict) -> list[tuple[str, int, int, dict]]:
    """(event, group index, handler index, handler) of every factbank handler."""
    found = []
    for event, groups in (data.get("hooks") or {}).items():
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            for hi, h in enumerate(group.get("hooks", []) if isinstance(group, dict) else []):
                if is_our_handler(h):
                    found.append((event, gi, hi, h))
    return found


# --- MCP server entries -----------------------------------------------------------------------


def is_our_mcp(entry: Any) -> bool:
    """A `factbank` server entry that runs factbank's own stdio MCP server."""
    if not isinstance(entry, dict):
        return False
    args = [str(a) for a in entry.get("args") or []]
    command = str(entry.get("command") or "")
    runs_factbank = "factbank_client.cli.main" in args or command.rsplit("/", 1)[-1] == "factbank"
    return runs_factbank and "mcp" in args


# --- the marked instruction block -------------------------------------------------------------


def render_block(body: str) -> str:
    return f"{BLOCK_BEGIN}\n{body.strip()}\n{BLOCK_END}\n"


def put_block(text: str | None, body: str) -> str:
    """Replace our block in place, or append it after one blank line."""
    block = render_block(body)
    text = text or ""
    if _BLOCK_RE.search(text):
        return _BLOCK_RE.sub(lambda _m: block, text, count=1)
    if not text:
        return block
    sep = "\n" if text.endswith("\n") else "\n\n"
    return text + sep + block


def drop_block(text: str) -> str:
    """Remove our block and the blank line put_block added before it."""
    m = _BLOCK_RE.search(text)
    if not m:
        return text
    before, after = text[: m.start()], text[m.end():]
    if not after and before.endswith("\n\n"):
        before = before[:-1]
    elif after.startswith("\n") and (not before or before.endswith("\n\n")):
        after = after[1:]
    return before + after


def has_block(text: str | None) -> bool:
    return bool(text and _BLOCK_RE.search(text))
