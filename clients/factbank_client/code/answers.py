"""The code tools' answers, once for the CLI (`factbank code`), the MCP server and the Pi
extension (which runs the CLI): each function brings the checkout's index up to date, asks it,
and returns the JSON answer; `text()` writes the lines an agent or a person reads.

Only `explain` talks to the bank, and only to read: the facts of this project whose source
names the symbol (`path::Qual.name`, as symbol-anchored facts are written) or a line inside
it (`path:12`). The code itself is never sent.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from factbank_client.code.graph import LIKELY, RESOLVED, CodeIndex, IndexError_
from factbank_common.inert import inert

TOOLS = ("callers", "refs", "explain", "search")


def run(tool: str, arg: str, *, cwd: Path | None = None, limit: int = 20,
        client: Any = None, project: str | None = None) -> dict:
    """Answer `tool` (callers, refs, explain, search) for `arg` in the checkout at `cwd`."""
    if tool not in TOOLS:
        raise ValueError(f"unknown code tool {tool!r} (one of {', '.join(TOOLS)})")
    if not arg.strip():
        raise ValueError("symbol is empty: name one as path::Qual.name, Qual.name or name"
                         if tool != "search" else "query is empty")
    with CodeIndex.here(cwd) as index:
        update = index.update().as_dict()
        started = time.perf_counter()
        if tool == "callers":
            out = index.callers(arg, limit=limit)
        elif tool == "refs":
            out = index.references(arg, limit=limit)
        elif tool == "search":
            out = index.search(arg, limit=limit)
        else:
            out = index.explain(arg)
            if "symbol" in out and isinstance(out["symbol"], dict):
                out["facts"], out["facts_note"] = anchored_facts(out["symbol"], client, project)
        out["index"] = {**update, "query_seconds": round(time.perf_counter() - started, 4),
                        "db": str(index.db_path)}
        out["tool"] = tool
        return out


def anchored_facts(symbol: dict, client: Any, project: str | None) -> tuple[list[dict], str]:
    """The bank's facts about `symbol`: source `path::qualname` (or a `path::` anchor inside
    it), or `path:line` with the line inside the symbol. Never raises: a bank that cannot be
    reached is named in the note and the rest of the answer stands."""
    if client is None:
        return [], "the bank was not asked (no client configured)"
    if not project:  # a symbol's source is relative to one repository: never a whole bank
        return [], "no project key for this checkout: pass --project (or `project`)"
    path, qual = symbol["path"], symbol["qualname"]
    facts, notes = [], []
    try:
        banks = list(client.banks)
    except Exception as exc:  # no bank configured
        return [], str(exc).splitlines()[0][:200]
    for bank in banks:
        try:
            for fact in client.list_facts(bank=bank, project=project,
                                          statuses=["active", "stale"]):
                loc = str((fact.get("source") or {}).get("location") or "")
                if _about(loc, path, qual, symbol["start_line"], symbol["end_line"]):
                    facts.append({"id": fact.get("id"), "bank": bank,
                                  "content": fact.get("content", ""), "source": loc,
                                  "status": fact.get("status"),
                                  "trust": fact.get("effective_trust", fact.get("trust")),
                                  "stale_reason": fact.get("stale_reason")})
        except Exception as exc:  # the graph answers without the bank
            notes.append(f"{bank}: {str(exc).splitlines()[0][:160]}")
    facts.sort(key=lambda f: (f["status"] != "active", -(f["trust"] or 0)))
    return facts, "; ".join(notes)


def _about(location: str, path: str, qual: str, start: int, end: int) -> bool:
    if "::" in location:
        where, _, name = location.partition("::")
        return where == path and (name == qual or name.startswith(qual + "."))
    where, _, line = location.partition(":")
    if where != path or not line:
        return False
    first = line.split("-", 1)[0]
    return first.isdigit() and start <= int(first) <= end


# -- text ------------------------------------------------------------------------------------


def _where(s: dict) -> str:
    return f"{s['path']}:{s['start_line']}-{s['end_line']}"


def _level(confidence: float) -> str:
    return "resolved" if confidence >= RESOLVED else "likely" if confidence >= LIKELY \
        else "possible"


def _not_found(out: dict) -> list[str]:
    if out.get("found") == "ambiguous":
        lines = [f"{out['symbol']!r} names {len(out['candidates'])} definitions; ask again "
                 "with one of these (path::Qual.name):"]
        lines += [f"  {c['source']}  ({c['kind']}, line {c['start_line']})"
                  for c in out["candidates"]]
        return lines
    return [f"No definition named {out['symbol']!r} in this checkout; try search_code with "
            "words from its name or purpose."]


def _site(s: dict) -> str:
    test = " [test]" if s.get("test") else ""
    return (f"  {s['confidence']:.2f} {_level(s['confidence']):8} {s['path']}:{s['line']}  "
            f"{s['caller']}{test}: {s['call']}  ({s['why']})")


def text(out: dict) -> list[str]:
    tool = out.get("tool")
    if tool == "search":
        lines = [f"Symbols for {out['query']!r}:"] if out["results"] else [
            f"No symbol matches {out['query']!r}."]
        for r in out["results"]:
            doc = (r["doc"] or "").split("\n", 1)[0][:100]
            lines.append(f"  {r['source']}  ({r['kind']}, lines {r['start_line']}-"
                         f"{r['end_line']}; {'+'.join(r['matched'])})  {r['signature']}"
                         + (f"  # {doc}" if doc else ""))
        if out.get("meaning"):
            lines.append(f"({out['meaning']})")
        return lines
    if not isinstance(out.get("symbol"), dict):
        return _not_found(out)
    s = out["symbol"]
    head = f"{s['qualname']} ({s['kind']}, {_where(s)})"
    if tool == "callers":
        calls = out["callers"]
        lines = [f"Callers of {head}: {len(calls) + out['more']} call sites, most certain "
                 "first (confidence, resolved >= 0.90, likely >= 0.50):"]
        lines += [_site(c) for c in calls] or ["  none found"]
        if out["more"]:
            lines.append(f"  ... {out['more']} more (raise limit)")
        if out["values"]:
            lines.append("Named but not called here (a value passed on, a read, a type, a "
                         "string; it may be called elsewhere):")
            lines += [_site(v) for v in out["values"]]
        lines.append(out["unresolved_note"])
        return lines
    if tool == "refs":
        refs = out["references"]
        lines = [f"References to {head}: {len(refs) + out['more']}:"]
        lines += [f"  {r['kind']:7}" + _site(r)[1:] for r in refs] or ["  none found"]
        if out["more"]:
            lines.append(f"  ... {out['more']} more (raise limit)")
        lines.append(out["unresolved_note"])
        return lines
    # explain
    lines = [f"{head}", f"  signature: {s['signature']}"]
    if s["doc"]:
        lines.append("  doc: " + s["doc"].replace("\n", "\n       "))
    if out["bases"]:
        lines.append("  bases: " + ", ".join(out["bases"]))
    if out["subclasses"]:
        lines.append("  subclasses: " + ", ".join(f"{c['name']} ({c['path']}:{c['line']})"
                                                  for c in out["subclasses"][:10]))
    lines.append(f"Callers ({len(out['callers']) + out['more_callers']}):")
    lines += [_site(c) for c in out["callers"]] or ["  none found"]
    lines.append(f"Callees ({len(out['callees'])}):")
    for c in out["callees"]:
        if c["path"]:
            lines.append(f"  {c['confidence']:.2f} line {c['line']}: {c['call']} -> {c['name']} "
                         f"({c['path']}:{c['def_line']})")
        else:
            lines.append(f"  ---- line {c['line']}: {c['call']} (outside this checkout or "
                         "not resolvable)")
    lines.append(f"Tests ({len(out['tests'])}):")
    lines += [f"  {t['confidence']:.2f} {t['path']}:{t['line']}  {t['test']}"
              for t in out["tests"]] or ["  none found"]
    facts = out.get("facts", [])
    lines.append(f"Facts anchored here ({len(facts)}):")
    for f in facts:
        trust = f"{f['trust']:.2f}" if isinstance(f["trust"], int | float) else "?"
        state = "STALE" + (f": {inert(f['stale_reason'], 200)}" if f.get("stale_reason")
                           else "") if f["status"] == "stale" else f["status"]
        lines.append(f"  #{f['id']} [{f['bank']}, trust {trust}, {state}] "
                     f"{inert(f['content'], 300)}  (source {inert(f['source'], 200)})")
    if not facts:
        lines.append("  none")
    if out.get("facts_note"):
        lines.append(f"  (bank not asked or not reachable: {inert(out['facts_note'], 300)})")
    lines.append(out["unresolved_note"])
    return lines


__all__ = ["TOOLS", "IndexError_", "anchored_facts", "run", "text"]
