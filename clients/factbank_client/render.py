"""The client's text layer: how facts, outcomes, histories and timelines read, for the two
audiences the client has.

- An agent (the MCP tools): one line per fact that leads with `#id` and trust, so the agent
  can confirm, dispute or supersede by id, and answers that name the tool to call next. The
  Pi extension writes the same lines in TypeScript (`assets/pi/factbank.ts`); a test runs both
  on the same answers (tests/unit/test_hooks_pi.py).
- A person (the CLI): a block per fact, tables of hits, events and categories.

Both are built from the same pieces (a time to the minute, the source as "kind location",
tags, questions, who did it), so a field reads the same wherever it is shown. Functions
return text, lines or table rows; printing stays with the caller. Pure functions of the
services' answers: no I/O, nothing imported but the standard library and inert.py
(every piece of bank text in them passes `inert`: one line, escaped, bounded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from factbank_common import output
from factbank_common.inert import inert

# A tool's name as the agent sees it, by the tool's key (`supersede` -> `factbank_supersede`
# in Pi); see factbank_client/tools.py.
Names = Callable[[str], str]

# --- the pieces --------------------------------------------------------------------------


def when(value: Any) -> str:
    """An ISO time to the minute ("2026-11-29 19:01"), or "-"."""
    return str(value or "-")[:16].replace("T", " ")


def where(fact: Mapping) -> str:
    """The source as "kind location" ("file deploy/api.yaml:4", "user")."""
    src = fact.get("source") or {}
    return inert(f"{src.get('kind', '?')} {src.get('location') or ''}".strip(), 500)


def tags(fact: Mapping) -> str:
    return inert(", ".join(map(str, fact.get("tags") or []))) or "-"


def questions(fact: Mapping) -> str:
    return inert(" | ".join(map(str, fact.get("questions") or []))) or "-"


def who(member: Any, agent: Any) -> str:
    """Who did it: "member/agent", "?" and "-" for what is not known."""
    return inert(f"{member or '?'}/{agent or '-'}", 200)


def short(text: str, width: int = 80) -> str:
    """One inert line of at most `width` characters (white space folded, "…" where cut)."""
    return inert(" ".join(str(text).split()), width)


def id_list(ids: Iterable[int], sep: str = ", ") -> str:
    return sep.join(f"#{i}" for i in ids)


def audience(answer: Mapping, label: str | None = None) -> str:
    """Where a write went and who can read it, from the answer's `visible_to`
    ("team bank acme, visible to 3 members (alice, bob, carol)"), with the config's label for
    the bank when it is not the bank's kind (a team token saved as "personal" said "stored in
    personal" and was taken for private). Without `visible_to` (an older server):
    the label."""
    v = answer.get("visible_to")
    label = label or str(answer.get("bank") or "")
    if not isinstance(v, Mapping):
        return label
    kind, n = str(v.get("kind") or "?"), int(v.get("members") or 0)
    names = [str(x) for x in v.get("names") or []]
    text = f"{kind} bank {v.get('bank')}"
    if label and label != kind:
        text += f' (configured here as "{label}")'
    text += f", visible to {n} member{'' if n == 1 else 's'}"
    if names:
        more = n - len(names)
        text += " (" + ", ".join(names) + (f", +{more} more" if more > 0 else "") + ")"
    return text


def matched_question(hit: Mapping) -> str | None:
    """The writer question a search hit matched best, or None (content or lexical only)."""
    match = hit.get("match")
    if isinstance(match, str) and match.startswith("question: "):
        return match[len("question: "):]
    return None


def current(history: Mapping) -> dict | None:
    """The fact that replaced the one a history is about, when it is outdated."""
    now = history.get("current")
    return now if now and now["id"] != history["fact"]["id"] else None


# --- for an agent (MCP; mirrored by the Pi extension) -------------------------------------


def fact_line(fact: Mapping, bank: str | None = None, match: float | None = None,
              companion: bool = False) -> str:
    label = f"{bank}, " if bank else ""
    flags = " tentative" if fact.get("tentative") else ""
    flags += f", match {match:.2f}" if match is not None else ""
    flags += ", below the gate" if companion else ""
    status = "" if fact.get("status") == "active" else f" {inert(fact.get('status'), 40)}"
    return (f"#{fact['id']} [{label}trust {fact.get('effective_trust', fact.get('trust', 0)):.2f}"
            f"{status}{flags}] {inert(fact['content'])} (source: {where(fact)}; "
            f"tags: {tags(fact)})")


def hit_lines(hit: Mapping) -> list[str]:
    """A search hit: its fact line, the stored question it matched, the outdated fact it was
    reached through."""
    lines = [fact_line(hit["fact"], hit["bank"], hit.get("relevance"),
                       bool(hit.get("companion")))]
    question = matched_question(hit)
    if question:
        lines.append(f"    (matched its question: {inert(question, 500)!r})")
    if hit.get("via"):
        lines.append(f"    (found via outdated #{hit['via']['superseded']}, replaced "
                     f"because: {inert(hit['via'].get('reason') or '-')})")
    return lines


def search_text(data: Mapping) -> str:
    lines = [line for hit in data["results"] for line in hit_lines(hit)]
    lines += [f"(note: {bank} search degraded: {why})"
              for bank, why in (data.get("degraded") or {}).items()]
    if not data["results"]:
        lines.insert(0, "No stored fact matches; proceed, and add what you learn.")
    return "\n".join(lines)


def outcome_text(outcome: Mapping, name: Names, no_questions: str) -> str:
    """What an add answers: stored or reinforced, what was redacted, which similar claims
    may need a supersede (with the exact ids to pass), and `no_questions` when the fact has
    none."""
    fact = outcome["fact"]
    if outcome["status"] == "retired":  # the bank already retired this claim: nothing stored
        successor = outcome.get("successor")
        head = (f"Not stored: this claim was fact #{fact['id']}, now {fact['status']}"
                + (f"; what holds now is fact #{successor['id']}: {successor['content']}"
                   if successor else "") + ".")
        return "\n".join([head, str(outcome.get("note") or "")]).strip()
    verb = "Reinforced existing" if outcome["status"] == "reinforced" else "Stored"
    lines = [f"{verb} fact #{fact['id']} in {inert(audience(outcome), 300)} "
             f"(trust {fact['trust']:.2f})."]
    for item in outcome.get("redacted") or []:
        lines.append(f"Redacted a {inert(item.get('kind', 'secret'), 80)} from "
                     f"{inert(item.get('field', '?'), 80)}; "
                     "never send secrets.")
    if outcome.get("possible_duplicate_of"):
        ids = [int(i) for i in outcome["possible_duplicate_of"]]
        lines.append(f"Similar but different claim(s) already stored: {id_list(ids)}. If they "
                     f"no longer hold, call {name('supersede')} with replaces="
                     f"{[*ids, fact['id']]}; if they still hold, nothing to do.")
    elif outcome.get("note"):
        lines.append(inert(outcome["note"]))
    if not fact.get("questions"):
        lines.append(no_questions)
    return "\n".join(lines)


def superseded_text(outcome: Mapping, replaces: Sequence[int], reason: str) -> str:
    return (f"Stored fact #{outcome['fact']['id']} in {inert(audience(outcome), 300)}; "
            f"it supersedes {id_list(replaces)} ({inert(reason)}).")


def history_text(data: Mapping) -> str:
    """One fact with its source, quote, questions, trust events, what it replaced and, when
    it is outdated, the current fact."""
    fact = data["fact"]
    by = fact.get("created_by") or {}
    lines = [fact_line(fact, data["bank"]),
             f"quote: {inert(fact['quote'])!r}",
             f"questions: {questions(fact)}",
             f"category: {inert(fact['category'], 100)}; "
             f"project: {inert(fact.get('project') or '-', 200)}; "
             f"origin: {inert(fact['origin'], 40)}; by {who(by.get('member'), by.get('agent'))}"
             f" at {when(fact['created_at'])}",
             *[inert(line) for line in why_not_current(fact)
               if not line.startswith("superseded")]]
    for e in data.get("events") or []:
        before, after = e.get("trust_before"), e.get("trust_after")
        trust = f"{after}" if before is None else f"{before} -> {after}"
        lines.append(f"  {when(e['created_at'])} {inert(e['kind'], 40)} (trust {trust})"
                     f" by {who(e.get('member'), e.get('agent'))}"
                     + (f": {inert(e['reason'])}" if e.get("reason") else ""))
    for old in data.get("supersedes") or []:
        lines.append(f"replaced #{old['id']}: {inert(old['content'])} "
                     f"(because: {inert(old.get('supersede_reason') or '-')})")
    now = current(data)
    if now:
        lines.append(f"OUTDATED: superseded ({inert(fact.get('supersede_reason') or '-')}); "
                     "current:"
                     f" {fact_line(now)}")
    return "\n".join(lines)


def judged_text(verb: str, fact: Mapping) -> str:
    return (f"{verb} #{fact['id']}: status {inert(fact['status'], 40)}, "
            f"trust now {fact['trust']:.2f}.")


def categories_text(data: Mapping[str, list[dict]]) -> str:
    lines = []
    for bank, cats in data.items():
        lines.append(f"{inert(bank, 100)}:")
        lines.extend(f"  {inert(c['name'], 100)} ({c.get('facts', 0)} facts"
                     + (", injected at session start" if c.get("auto_inject") else "")
                     + f"): {inert(c.get('description') or '')}" for c in cats)
    return "\n".join(lines)


# --- for a person (the CLI) ---------------------------------------------------------------


def outcome_lines(outcome: Mapping, *, note: bool = True) -> list[str]:
    fact = outcome["fact"]
    lines = [f"{inert(outcome['status'], 40)} fact {fact['id']} in {inert(audience(outcome), 300)} "
             f"(trust {fact['trust']:.2f})"]
    lines += [f"  redacted: {inert(item.get('kind', item), 80)} in "
              f"{inert(item.get('field', '?'), 80)}"
              for item in outcome.get("redacted") or []]
    if note and outcome.get("note"):
        lines.append(f"  note: {inert(outcome['note'])}")
    if outcome.get("possible_duplicate_of"):
        ids = " ".join(str(i) for i in [*outcome["possible_duplicate_of"], fact["id"]])
        lines.append(f"  if it does: factbank supersede CONTENT {ids} --reason WHY ... "
                     "(retires them all, keeps one current copy)")
    return lines


def confirmed(fact: Mapping) -> str | None:
    """When the fact was last confirmed, or None if it never was: `confirmed_at` starts equal
    to `created_at` (decay counts from it), so every fact used to say "confirmed <its creation
    time>"."""
    at = fact.get("confirmed_at")
    return when(at) if at and at != fact.get("created_at") else None


def why_not_current(fact: Mapping) -> list[str]:
    """Why a fact is not simply active: stale (with the reason and the text now at its old
    line), under review (which cited fact changed), superseded (by which, why)."""
    lines = []
    stale = fact.get("stale") or {}
    if fact.get("status") == "stale":
        lines.append(f"stale since {when(stale.get('since'))}: "
                     f"{stale.get('reason') or 'its source changed'}")
        lines += [f"    {line}" for line in str(stale.get("context") or "").splitlines()]
    review = fact.get("review") or {}
    if review:
        lines.append(f"under review since {when(review.get('since'))}: "
                     f"{review.get('reason') or 'a fact it cites changed'} "
                     f"(cited fact #{review.get('cause')}); not injected until confirmed")
    if fact.get("superseded_by"):
        lines.append(f"superseded by #{fact['superseded_by']}: "
                     f"{fact.get('supersede_reason') or ''}".rstrip())
    return lines


def fact_lines(fact: Mapping, bank: str | None = None) -> list[str]:
    by = fact.get("created_by") or {}
    seen = confirmed(fact)
    lines = [
        f"#{fact['id']}  {inert(fact['status'], 40)}"
        f"{' tentative' if fact.get('tentative') else ''}  "
        f"trust {fact['trust']:.2f} (effective {fact['effective_trust']:.2f})  "
        f"{inert(bank or fact['bank'], 100)}",
        f"  {inert(fact['content'])}",
        f"  source:   {where(fact)}",
        f"  quote:    {inert(fact['quote'])!r}",
        f"  category: {inert(fact['category'], 100)}   tags: {tags(fact)}",
        f"  questions: {questions(fact)}",
        f"  project:  {inert(fact.get('project') or '-', 200)}",
        f"  origin:   {inert(fact['origin'], 40)}, by {who(by.get('member'), by.get('agent'))} "
        f"at {when(fact['created_at'])}, " + (f"confirmed {seen}" if seen else "never confirmed"),
        *(f"  {inert(line)}" for line in why_not_current(fact)),
    ]
    if fact.get("status") == "stale":
        lines.append(f"  to revive it: factbank confirm {fact['id']} --quote '...' (a fresh "
                     "quote from its source), or supersede it")
    return lines


HIT_COLUMNS = ["id", "bank", "score", "trust", "category", "content"]


def hit_rows(results: Iterable[Mapping]) -> tuple[list[dict], list[str]]:
    """Search hits as table rows, and the columns to show (`matched question` only when a
    hit has one)."""
    rows = []
    for r in results:
        f = r["fact"]
        via = r.get("via")
        note = f" (via #{via['superseded']}: {short(via.get('reason') or '', 200)})" if via else ""
        note += " (below the gate)" if r.get("companion") else ""
        # Stale and under-review facts stay searchable, marked: never injected.
        if f.get("status") == "stale":
            note += f" [stale: {short((f.get('stale') or {}).get('reason') or '', 60)}]"
        elif f.get("review"):
            note += f" [under review: {short(f['review'].get('reason') or '', 60)}]"
        question = matched_question(r)
        rows.append({"id": f["id"], "bank": inert(r["bank"], 100), "score": f"{r['score']:.3f}",
                     "trust": f"{f['effective_trust']:.2f}",
                     "category": inert(f["category"], 100),
                     "content": short(f["content"]) + note,
                     "matched question": short(question, 50) if question else None})
    columns = list(HIT_COLUMNS)
    if any(row["matched question"] for row in rows):
        columns.append("matched question")
    return rows, columns


EVENT_COLUMNS = ["at", "event", "trust", "by", "related", "reason"]


def event_rows(events: Iterable[Mapping]) -> list[dict]:
    def trust(value: Any) -> str:
        return "-" if value is None else f"{value}"

    return [{"at": when(e["created_at"]), "event": inert(e["kind"], 40),
             "trust": f"{trust(e['trust_before'])} -> {trust(e['trust_after'])}",
             "by": who(e.get("member"), e.get("agent")),
             "related": e.get("related_fact"), "reason": inert(e.get("reason") or "")}
            for e in events]


def links_lines(data: Mapping) -> list[str]:
    """A history's links: the facts it superseded and the ones that superseded it."""
    lines = [f"supersedes #{old['id']}: {short(old['content'])} "
             f"({inert(old.get('supersede_reason') or '')})"
             for old in data.get("supersedes") or []]
    lines += [f"superseded by #{new['id']}: {short(new['content'])}"
              for new in data.get("successors") or []]
    return lines


def questions_lines(fact: Mapping, *, changed: bool) -> list[str]:
    listed = fact.get("questions") or []
    lines = [f"fact {fact['id']} in {inert(fact['bank_label'], 100)} "
             f"{'now has' if changed else 'has'} "
             f"{len(listed)} question{'' if len(listed) == 1 else 's'}"]
    lines += [f"  {inert(q)}" for q in listed]
    if not listed:
        lines.append(f"  add 2-4, in English and Chinese: factbank questions {fact['id']} "
                     "--add '...' --add '...'")
    return lines


def judged_line(verb: str, fact: Mapping) -> str:
    return (f"{verb} fact {fact['id']} in {inert(fact['bank_label'], 100)}: "
            f"status {inert(fact['status'], 40)}, "
            f"trust {fact['trust']:.2f}")


CATEGORY_COLUMNS = ["bank", "name", "facts", "auto_inject", "decays", "description"]
CATEGORY_NOTE = ("\nauto_inject: what session start injects from the category: all its facts, "
                 "or only the current project's.")


def category_rows(data: Mapping[str, list[dict]]) -> list[dict]:
    rows = [{"bank": bank, **c} for bank, cats in data.items() for c in cats]
    for r in rows:
        # What session start really injects: every fact of an auto-inject category, and of
        # any other category the facts of the current project (inject.session_block).
        r["auto_inject"] = "all" if r.get("auto_inject") else "project"
        r["decays"] = "yes" if r.get("decays") else "no"
        r["name"] = inert(r.get("name"), 100)
        r["description"] = inert(r.get("description") or "")
    return rows


def nested_lines(data: Any, indent: str = "") -> list[str]:
    """Nested dicts and lists (a bank's stats) as an indented outline."""
    if isinstance(data, dict):
        lines = []
        for key, value in data.items():
            if isinstance(value, dict | list):
                lines += [f"{indent}{inert(key, 200)}:", *nested_lines(value, indent + "  ")]
            else:
                lines.append(f"{indent}{inert(key, 200)}: {'-' if value is None else inert(value)}")
        return lines
    if isinstance(data, list):
        return [f"{indent}- " + ", ".join(f"{inert(k, 200)}={inert(v)}" for k, v in item.items())
                if isinstance(item, dict) else f"{indent}- {inert(item)}" for item in data]
    return [f"{indent}{inert(data)}"]


# --- the timeline (for a person) ----------------------------------------------------------


TIMELINE_COLUMNS = ["when", "who", "machine", "branch", "kind", "what"]


def ago(at: str | None, now: datetime) -> str:
    """How long before `now` an ISO time was: "42s ago", "5m ago", "3h ago", "2d ago"."""
    if not at:
        return "-"
    try:
        then = datetime.fromisoformat(at)
    except ValueError:
        return at
    return output.ago((now - then).total_seconds())


def timeline_what(e: Mapping) -> str:
    kind = e.get("kind")
    if kind == "file":
        return inert(e.get("path", ""), 500) + (f" ({inert(e['tool'], 40)})"
                                                if e.get("tool") else "")
    if kind == "command":
        return f"$ {short(str(e.get('command', '')))}" + (
            f"  -> {inert(e['exit_code'], 20)}" if "exit_code" in e else "")
    if kind == "session_start":
        return "session started" + (f" in {inert(e['cwd'], 500)}" if e.get("cwd") else "")
    if kind == "session_end":
        return "session ended"
    if kind == "handoff" and e.get("text"):
        state = "delivered" if e.get("delivered") else "open"
        return f"{inert(e.get('detail') or 'handoff', 200)} ({state}): {short(str(e['text']), 100)}"
    return inert(e.get("detail") or "")


def timeline_rows(events: Sequence[Mapping], now: datetime, *,
                  projects: bool = False) -> tuple[list[dict], list[str]]:
    """Timeline events as table rows, newest first as given, and the columns (with a
    `project` column when `projects`)."""
    rows = [{"when": ago(e.get("at"), now),
             "who": inert("/".join(x for x in (e.get("member"), e.get("agent")) if x), 200)
             or "-",
             "machine": inert(e.get("machine") or "-", 200),
             "branch": inert(e.get("branch") or "-", 200),
             "kind": inert(e.get("kind"), 40),
             "what": timeline_what(e)} for e in events]
    columns = list(TIMELINE_COLUMNS)
    if projects:
        for row, e in zip(rows, events, strict=True):
            row["project"] = inert(e.get("project") or "-", 200)
        columns.insert(4, "project")
    return rows, columns


def handoff_line(handoff: Mapping, project: str) -> str:
    target = inert(handoff.get("to_agent") or handoff.get("to_member") or "the next session", 200)
    return (f"handoff #{handoff['id']} for {target} in {inert(project, 200)}, "
            f"in {inert(audience(handoff), 300)}: "
            "it appears once, in that session's start block")


# --- verify, rule candidates, native-memory migration --------------------------


def verify_lines(report: Mapping) -> list[str]:
    """`factbank verify`: one line per fact that did not stay fresh (moved, stale, skipped),
    then the counts. `report`: {"project", "verdicts": [...], "skipped": [...], "banks":
    {label: the verify route's answer}}."""
    lines: list[str] = []
    for v in report.get("verdicts", []):
        if v["verdict"] == "moved":
            lines.append(f"#{v['id']} moved: {inert(v['was'], 500)} -> "
                         f"{inert(v['location'], 500)}")
        elif v["verdict"] == "stale":
            lines.append(f"#{v['id']} stale: {inert(v['reason'])}")
            # The new text around the old line: its own lines (LF only, at most 12), each inert.
            lines.extend(f"    {inert(c)}" for c in (v.get("context") or "").split("\n")[:12]
                         if c.strip())
    for s in report.get("skipped", []):
        lines.append(f"#{s['id']} not checked here: {inert(s['reason'])}")
    banks = report.get("banks", {})
    for label, ans in banks.items():
        for s in ans.get("skipped", []):
            lines.append(f"#{s['id']} left as it is by the server ({inert(label, 100)}): "
                         f"{inert(s['reason'])}")
    proposed = [i for a in banks.values() for i in a.get("proposed", [])]
    if proposed:
        lines.append(f"successor(s) proposed for review: candidate {id_list(proposed)} "
                     "(factbank queue list)")
    total = {k: sum(int(a.get(k) or 0) for a in banks.values())
             for k in ("fresh", "moved", "stale", "still_stale", "flagged")}
    flagged = [i for a in banks.values() for i in a.get("flagged_ids", [])]
    n = len(report.get("verdicts", []))
    lines.append(
        f"verified {n} fact{'s' if n != 1 else ''} of {inert(report.get('project') or '-', 200)}: "
        f"{total['fresh']} fresh, {total['moved']} moved, {total['stale']} turned stale, "
        f"{total['still_stale']} still stale"
        + (f"; {total['flagged']} derived fact(s) flagged for review: {id_list(flagged)}"
           if total["flagged"] else "")
        + (f"; {len(report['skipped'])} not checked here" if report.get("skipped") else ""))
    return lines


_EFFECT_TEXT = {"stale": "would go stale", "moved": "would move", "unknown": "cannot tell",
                "unaffected": "unaffected"}


def _diff_summary(report: Mapping) -> str:
    c = report["counts"]
    n = report["checked"]
    return (f"{n} fact{'s' if n != 1 else ''} of {inert(report.get('project') or '-', 200)} "
            f"checked against {inert(report['range'], 100)}: {c['stale']} would go stale, "
            f"{c['moved']} would move, {c['unaffected']} unaffected"
            + (f", {c['unknown']} cannot tell" if c["unknown"] else ""))


def verify_diff_lines(report: Mapping) -> list[str]:
    """`factbank verify --diff/--staged`: each fact the change affects, with the command that
    settles it, then the counts."""
    lines: list[str] = []
    for r in report["facts"]:
        what = _EFFECT_TEXT[r["effect"]]
        if r["effect"] == "moved":
            detail = f"{inert(r['location'], 500)} -> {inert(r['new_location'] or '', 500)}"
        else:
            detail = f"{inert(r['location'], 500)}: {inert(r.get('reason') or '')}"
        lines.append(f"#{r['id']} {what}: {detail}")
        if r.get("command"):
            lines.append(f"    {inert(r['command'])}")
    lines.append(_diff_summary(report))
    return lines


def _cell(text: str, limit: int = 200) -> str:
    return inert(text, limit, markdown=True).replace("|", "\\|")


def verify_diff_markdown(report: Mapping) -> str:
    """The same report as a pull-request comment: a table of the affected facts (content cut
    to 120 characters) and, in one code block, the command that supersedes or confirms each."""
    c = report["counts"]
    head = ("### factbank: " + (f"{c['stale']} fact{'s' if c['stale'] != 1 else ''} would go "
                                "stale" if c["stale"] else "no fact would go stale")
            + (f", {c['moved']} would move" if c["moved"] else ""))
    out = ["<!-- factbank-verify -->", head, "", _cell(_diff_summary(report), 400) + ".", ""]
    def table(rows: list) -> list[str]:
        lines = ["| fact | source | after this change |", "|---|---|---|"]
        for r in rows:
            if r["effect"] == "moved":
                after = f"would move to `{_cell(r['new_location'] or '')}`"
            else:
                after = f"**{_EFFECT_TEXT[r['effect']]}**: {_cell(r.get('reason') or '')}"
            lines.append(f"| #{r['id']} {_cell(r.get('content') or '', 120)} | "
                         f"`{_cell(r['location'])}` | {after} |")
        commands = [inert(r["command"]) for r in rows if r.get("command")]
        return lines + (["", "```sh", *commands, "```"] if commands else [])

    urgent = [r for r in report["facts"] if r["effect"] in ("stale", "unknown")]
    moved = [r for r in report["facts"] if r["effect"] == "moved"]
    if urgent:
        if any(r["effect"] == "stale" for r in urgent):
            out += ["Supersede each fact that would go stale, on this branch (write the new "
                    "claim; the quote given is the line that replaces the old one):", ""]
        out += table(urgent)
    if moved:
        # Folded: `factbank verify` relocates them after the merge by itself.
        out += ["", f"<details><summary>{len(moved)} fact{'s' if len(moved) != 1 else ''} "
                "would move (relocated by factbank verify after the merge; to record it now, "
                "confirm)</summary>", "", *table(moved), "", "</details>"]
    return "\n".join(out) + "\n"


def rule_candidate_lines(candidates: Sequence[Mapping]) -> list[str]:
    """`factbank rules candidates`: each claim, the projects it held in, its evidence."""
    if not candidates:
        return ["no rule candidates: no claim has been confirmed in two unrelated projects"]
    lines: list[str] = []
    for c in candidates:
        fact = c["fact"]
        lines.append(f"#{fact['id']} ({inert(c.get('bank', ''), 100)}) {inert(fact['content'])}")
        lines.append(f"  held in: {', '.join(inert(p, 200) for p in c.get('projects', []))}")
        for e in c.get("evidence", []):
            lines.append(f"  - confirmed in {inert(e['project'], 200)} ({when(e.get('at'))}, "
                         f"{who(e.get('member'), e.get('agent'))}, fact #{e['fact_id']})")
        lines.append(f"  propose it: factbank rules propose {fact['id']} --to AGENTS.md")
    return lines


def migrate_lines(plan: Mapping) -> list[str]:
    """`factbank migrate-native`: each candidate with the gate's verdict, then the rules left
    alone. `plan`: {"harness", "backup", "candidates": [{"where", "quote", "check", "saved"}],
    "rules": [{"where", "line"}]}."""
    lines: list[str] = []
    if plan.get("backup"):
        lines.append(f"backed up {plan.get('files', 0)} file(s) to {plan['backup']}")
    lines.extend(f"not read: {r['reason']}" for r in plan.get("refused", []))
    for c in plan.get("candidates", []):
        chk = c.get("check") or {}
        verdict = chk.get("verdict", "?")
        if verdict == "same_claim":
            state = f"already stored as #{chk.get('same_as')}"
        elif verdict == "retired":
            state = f"retired in the bank as #{chk.get('same_as')} (not saved)"
        elif verdict == "refused":
            state = "refused: " + "; ".join(f"{inert(r.get('field'), 80)}: {inert(r.get('reason'))}"
                                            for r in chk.get("reasons", []))
        elif c.get("saved"):
            state = f"saved as #{c['saved']}"
        else:
            state = "new (not saved)"
        extra = []
        if chk.get("redacted"):
            kinds = sorted({inert(r.get("kind"), 80) for r in chk["redacted"]})
            extra.append("redacted " + ", ".join(kinds))
        if chk.get("possible_duplicate_of"):
            extra.append(f"may supersede {id_list(chk['possible_duplicate_of'])}")
        lines.append(f"{inert(c['where'], 500)}: {short(c['quote'], 70)}  [{state}"
                     + ("; " + "; ".join(extra) if extra else "") + "]")
    if plan.get("rules"):
        lines.append(f"left alone ({len(plan['rules'])} instruction line(s): rules stay rules):")
        lines.extend(f"  {inert(r['where'], 500)}: {short(r['line'], 70)}" for r in plan["rules"])
    counts = {k: sum(1 for c in plan.get("candidates", []) if (c.get("check") or {}).get(
        "verdict") == k) for k in ("new", "same_claim", "refused")}
    saved = sum(1 for c in plan.get("candidates", []) if c.get("saved"))
    lines.append(f"{plan.get('harness')}: {len(plan.get('candidates', []))} candidate fact(s): "
                 f"{counts['new']} new, {counts['same_claim']} already stored, "
                 f"{counts['refused']} refused; {saved} saved")
    return lines


# --- dispatch (headless runs; factbank_client/dispatch) ------------------------------------


DISPATCH_COLUMNS = ["id", "agent", "status", "exit", "started", "took", "repo", "task"]
DISPATCH_MARKS = {"message": "»", "command": "$", "edit": "✎", "tool": "·", "status": "#",
                  "error": "!", "stderr": "2>"}


def _seconds(start: Any, end: Any) -> str:
    try:
        took = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return "-"
    return f"{took:.0f}s" if took < 120 else f"{took / 60:.0f}m"


def dispatch_run_rows(runs: Iterable[Mapping]) -> tuple[list[dict], list[str]]:
    """Runs (as `Run.to_dict()`) as table rows, newest first as given."""
    rows = [{"id": r["id"], "agent": r["agent"], "status": r["status"],
             "exit": r.get("exit_code"), "started": when(r.get("started_at")),
             "took": _seconds(r.get("started_at"), r.get("ended_at")) if r.get("ended_at")
             else "-", "repo": inert(r.get("project") or r.get("repo"), 200),
             "task": short(str(r.get("task") or ""), 60)} for r in runs]
    return rows, list(DISPATCH_COLUMNS)


def dispatch_event_line(e: Mapping) -> str:
    """One event of a run's log for a terminal: `$ pytest -q  -> 1` with the command's
    output indented under it, `✎ src/app.py (Edit)`, `» the agent's text`, `! error`."""
    kind = e.get("kind")
    mark = DISPATCH_MARKS.get(str(kind), "?")
    text = str(e.get("text") or "")
    if kind == "command":
        code = e.get("exit_code")
        head = f"$ {inert(e.get('command') or '')}  -> {'?' if code is None else inert(code, 20)}"
        body = "\n".join("    " + inert(line) for line in text.splitlines()[-8:])
        return head + ("\n" + body if body else "")
    if kind == "edit":
        verb = inert(text.split(" ", 1)[0], 40) if text else "edit"
        return f"{mark} {inert(e.get('path') or '?', 500)} ({verb})"
    if kind == "message":
        return f"{mark} " + "\n  ".join(inert(line) for line in text.split("\n"))
    return f"{mark} {inert(text)}"


def dispatch_run_lines(r: Mapping) -> list[str]:
    """A run's record for a person: what, where, how it ended, what it touched."""
    outcome = r["status"] + (f", exit {r['exit_code']}" if r.get("exit_code") is not None
                             else "")
    took = _seconds(r.get("started_at"), r.get("ended_at"))
    lines = [f"run {inert(r['id'], 80)}: {inert(r['agent'], 40)} {inert(outcome, 80)}",
             f"  task:     {inert(r.get('task'))}",
             f"  repo:     {inert(r.get('repo'), 500)}"
             + (f" ({inert(r['project'], 200)})" if r.get("project") else ""),
             f"  started:  {when(r.get('started_at'))}"
              + (f", ended {when(r.get('ended_at'))} ({took})" if r.get("ended_at") else "")]
    if r.get("session_id"):
        lines.append(f"  session:  {inert(r['session_id'], 200)}")
    if r.get("files"):
        lines.append(f"  edited:   {', '.join(inert(f, 500) for f in r['files'][:20])}")
    if r.get("commands"):
        lines.append(f"  commands: {r['commands']} ({r.get('failed_commands', 0)} failed)")
    if r.get("timeline"):
        lines.append(f"  timeline: {inert(r['timeline'])}")
    if r.get("handoff_id"):
        lines.append(f"  handoff:  #{r['handoff_id']}")
    if r.get("error"):
        lines.append(f"  error:    {inert(r['error'])}")
    return lines


def dispatch_handoff_line(r: Mapping, handoff_id: int, to_agent: str | None) -> str:
    target = inert(to_agent or "the next session", 200)
    return (f"handoff #{handoff_id} for {target} in {inert(r.get('project'), 200)}: run {r['id']} "
            f"({r['agent']}, {r['status']}); it appears once, in that session's start block")


MISS_COLUMNS = ("repeats", "same", "correction", "equivalent", "retired", "recall_miss",
                "presentation_miss", "no_session", "repeated_correction")
MISS_HEADS = ("repeats", "same", "corr", "equivalent", "retired", "recall miss", "present. miss",
              "no session", "repeated corr.")


def _miss_row(label: str, counts: Mapping) -> str:
    return "| " + " | ".join([label, *(str(counts.get(c, 0)) for c in MISS_COLUMNS)]) + " |"


def miss_lines(bank: str, report: Mapping) -> list[str]:
    """`factbank stats --misses` for one bank: a table of repeats per week and project, the
    facts involved under it, the corrections recognised, and the before/after table."""
    head = "| week, project | " + " | ".join(MISS_HEADS) + " |"
    rule = "|---" * (len(MISS_HEADS) + 1) + "|"
    lines = [f"{bank}: repeats since {str(report.get('since', ''))[:10]}", "", head, rule]
    for w in report.get("weeks", []):
        lines.append(_miss_row(short(f"{w['week']} {w.get('project') or '(global)'}", 60), w))
    lines.append(_miss_row("total", report.get("totals", {})))
    for w in report.get("weeks", []):
        for f in w.get("facts", []):
            rc = ", repeated correction" if f.get("repeated_correction") else ""
            new = f" -> #{f['new']}" if f.get("new") else ""
            lines.append(f"  {w['week']} #{f['id']}{new} {f['kind']}, {f['shown']}{rc}: "
                         f"{short(f.get('content') or '', 70)}")
    t = report.get("totals", {})
    lines += ["", f"corrections recognised by the prompt hook: {t.get('recognised', 0)}; "
              f"facts saved after one: {t.get('saved_after_nudge', 0)}; repeats of those: "
              f"{t.get('repeats_of_nudged', 0)}"]
    around = report.get("around")
    if around:
        n = around["weeks"]
        lines += ["", f"around {around['date']} ({n} weeks each side):", "",
                  "| | " + " | ".join(MISS_HEADS) + " |", rule,
                  _miss_row(f"{n} weeks before", around["before"]),
                  _miss_row(f"{n} weeks after", around["after"])]
    return lines
