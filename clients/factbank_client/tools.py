"""The agent tools' texts, for every harness, from one table (assets/tools.toml).

The MCP server takes its instructions, tool descriptions and parameter texts from here, and
`factbank install pi` writes the same texts (with the wire constants of schema.py) into the
Pi extension, so an agent reads the same manual in Claude Code, Codex and Pi. They had
drifted while each harness kept its own copy: Pi's search lost the explanation of the match
score.

Why a data file: the Pi extension is TypeScript and cannot import Python strings; the
installer fills them in (`pi_shared`). Why TOML: the descriptions are paragraphs, and TOML's
multi-line strings (a line ending in a backslash continues the line) keep them readable and
diffable; `tomllib` is in the standard library, so the light client needs nothing new.

Tool names differ by harness (Pi's live beside its own `read` and `bash`, so they carry a
`factbank_` prefix); a text names another tool as `{key}` and gets the harness's name for it.
A text that names a tool its harness does not offer is an error, so no agent is told to call
a tool it lacks.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from factbank_common import schema

HARNESSES = ("mcp", "pi")
_REF = re.compile(r"\{(\w+)\}")


def tool_name(key: str, harness: str) -> str:
    """What `harness` calls tool `key`: `supersede` in MCP, `factbank_supersede` in Pi."""
    return key if harness == "mcp" else f"factbank_{key}"


@dataclass(frozen=True)
class Tool:
    key: str
    name: str
    label: str
    description: str
    params: dict[str, str]  # parameter -> text, in the order the tool takes them
    local: bool = False  # needs this machine's checkout (the code graph): not over HTTP


@dataclass(frozen=True)
class Texts:
    """Everything one harness tells the model about the tools."""

    harness: str
    tools: dict[str, Tool]  # by key, in the order the harness offers them
    messages: dict[str, str]
    instructions: str | None  # the MCP server's instructions; Pi has none

    def name(self, key: str) -> str:
        return self.tools[key].name

    def param(self, tool: str, name: str) -> str:
        return self.tools[tool].params[name]


def _table() -> dict[str, Any]:
    text = resources.files("factbank_client").joinpath("assets", "tools.toml").read_text("utf-8")
    return tomllib.loads(text)


@cache
def texts(harness: str) -> Texts:
    """The texts as `harness` shows them; ValueError if the table is inconsistent (a tool
    without a description or a parameter text, a reference to a tool the harness lacks)."""
    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r} (one of {', '.join(HARNESSES)})")
    table = _table()
    own = table.get(harness, {})
    offered = own.get("tools", list(table["tools"]))
    missing = [key for key in offered if key not in table["tools"]]
    if missing:
        raise ValueError(f"[{harness}] tools names unknown tools: {', '.join(missing)}")
    names = {key: tool_name(key, harness) for key in offered}

    def fill(text: str, where: str) -> str:
        def one(m: re.Match) -> str:
            if m.group(1) not in names:
                raise ValueError(f"tools.toml {where} names the tool {m.group(1)!r}, which "
                                 f"{harness} does not offer")
            return names[m.group(1)]

        return _REF.sub(one, text)

    shared = {**table.get("params", {}), **own.get("params", {})}
    tools = {}
    for key in offered:
        spec = table["tools"][key]
        params = {}
        for param in spec["takes"]:
            text = spec.get("params", {}).get(param, shared.get(param))
            if text is None:
                raise ValueError(f"tools.toml: no text for parameter {param!r} of {key}")
            params[param] = fill(text, f"{key}.{param}")
        tools[key] = Tool(key, names[key], f"factbank {key}",
                          fill(spec["description"], key), params, bool(spec.get("local")))
    messages = {key: fill(text, key) for key, text in table.get("messages", {}).items()}
    instructions = own.get("instructions")
    return Texts(harness, tools, messages,
                 fill(instructions, "instructions") if instructions else None)


def pi_shared() -> dict[str, Any]:
    """What the installer writes into the Pi extension: Pi's tool texts and the wire
    constants its schemas use (the same values MCP's schemas are built from)."""
    pi = texts("pi")
    return {
        "tools": {key: {"name": t.name, "label": t.label, "description": t.description,
                        "params": t.params} for key, t in pi.tools.items()},
        "messages": pi.messages,
        "sourceKinds": list(schema.SOURCE_KINDS),
        "origins": list(schema.ORIGINS),
        "maxQuestions": schema.MAX_QUESTIONS,
        "searchLimit": schema.SEARCH_LIMIT,
        "searchLimitMax": schema.SEARCH_LIMIT_MAX,
    }
