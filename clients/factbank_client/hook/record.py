"""The hooks record the timeline: what a session touched and ran, never facts.

Runs in the child `hookentry.detach` forks (the hook itself has already returned), except the
session start, which `hookmain` records itself before it asks for the session block.

What each harness reports, and so what is recorded from where (seen in the real harnesses,
tests/harness/test_e2e_timeline.py):

* Claude Code: files from the PostToolUse of Edit/Write/MultiEdit/NotebookEdit; commands
  from the PostToolUse of Bash (exit 0: a non-zero exit is a failed tool) and from
  PostToolUseFailure (the N of its `Exit code N`).
* Codex: files and commands from its rollout (`transcript_path`): apply_patch fires no hook,
  and a Bash PostToolUse carries no exit code. (No rollout named: the payload, as it is.)
* Pi: the extension's `tool_result` events (assets/pi/factbank.ts), not this module.

Codex's rollout is read from where the session's last hook stopped, at every hook that can
(PostToolUse, Stop at the end of each turn, SessionEnd): an edit is recorded at the next one.
Every event carries the key `factbank import-history` gives the same tool call, so the server
stores it once whoever sends it, and twice-read rollout lines cost nothing.

A recording hook never waits for the service: the events go to a local buffer (JSONL, 0600,
bounded at MAX_BUFFER_LINES: the oldest are dropped, and counted in hooks.log), then one child
at a time (an flock) sends the whole buffer. What is not accepted stays buffered and goes with
the next event, so a service that is down loses nothing within the bound. A file event's
answer carries its conflicts (another session touched the file within the window); they are
left in `sessions/<id>.pending` as the exact PostToolUse output, which the session's next
hook prints (`pending.take_pending`), or its next prompt hook (`take_warnings`).
"""

from __future__ import annotations

import os
import time

from factbank_client import lightjson

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link planted in the cache is never followed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FLUSH_BUDGET = 0.3  # the session start's send (it waits for its block anyway)
SEND_BUDGET = 10.0  # a child's sends: nobody waits for it
CHILD_DEADLINE = 30  # seconds: a child that hangs on a lock or a socket exits
MAX_BUFFER_LINES = 2000
MAX_BATCH = 500
MAX_WARNINGS = 5
CONFLICT_HEADER = "[factbank] Possible edit conflict (timeline, not facts):"
PATCH_TOOLS = {"apply_patch"}
CODEX_SHELLS = {"Bash", "shell", "exec_command", "local_shell"}


def agent_name(data: dict) -> str:
    """`claude` or `codex` (the name a handoff's `--to` uses), from what each harness sends:
    Claude Code sets CLAUDECODE; Codex's payloads carry `turn_id`/`model`, and its
    SessionEnd, which has neither, names a rollout under `.codex/`. Gemini CLI, Qwen Code
    and Copilot CLI set CLAUDE_PROJECT_DIR too: their payloads are named by hookadapt."""
    forced = data.get("factbank_agent")
    if isinstance(forced, str) and forced:
        return forced
    if os.environ.get("CLAUDECODE") or os.environ.get("CLAUDE_PROJECT_DIR"):
        return "claude"
    transcript = data.get("transcript_path")
    if "turn_id" in data or "model" in data or (
            isinstance(transcript, str) and f"{os.sep}.codex{os.sep}" in transcript):
        return "codex"
    return "hook"


def _state() -> Any:
    from factbank_client.hook import state as hookstate

    return hookstate


def _log(message: str) -> None:
    _state().log(message)


def buffer_path() -> str:
    return os.path.join(_state().cache_dir(), "timeline-buffer.jsonl")


HOOK_TIME: list[float] = []  # when the hook ran (set by `process`): its events' time


def _now() -> Any:
    """When the hook ran (not when its child got round to the work), else now."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(HOOK_TIME[-1], UTC) if HOOK_TIME else datetime.now(UTC)


def _session(data: dict, agent: str) -> Any:
    from factbank_client.history import Session

    cwd = str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    return Session(str(data.get("session_id") or ""), agent, cwd)


# --- the events of one hook ---------------------------------------------------------------


def patch_paths(tool_input: Any) -> list[str]:
    """The files an apply_patch input names (`*** Update File: src/app.py`)."""
    text = tool_input
    if isinstance(tool_input, dict):
        text = tool_input.get("input") or tool_input.get("patch") or tool_input.get("command")
    if isinstance(text, list):
        text = "\n".join(str(t) for t in text)
    if not isinstance(text, str):
        return []
    import re

    return re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", text, re.M)


def _codex_payload_events(session: Any, data: dict) -> list[dict]:
    """A Codex PostToolUse without a rollout to read (`transcript_path` null): the patch's
    files, or the command (its exit code is not in the payload)."""
    tool = str(data.get("tool_name") or "")
    tool_input = data.get("tool_input")
    call = str(data.get("tool_use_id") or "") or None
    at = _now()
    if tool in PATCH_TOOLS:
        return [session.file(f"{call}:{i}" if call else None, at, p, tool, data.get("cwd"))
                for i, p in enumerate(patch_paths(tool_input)[:50])]
    if tool in CODEX_SHELLS:
        command = tool_input.get("command") if isinstance(tool_input, dict) else tool_input
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str) and command.strip():
            return [session.command(f"{call}:0" if call else None, at, command, tool, None)]
    return []


def _codex_rollout_events(session: Any, path: str) -> tuple[list[dict], Any]:
    """The edits and commands of Codex's rollout since this session's last look, and what to
    save once they are buffered (the offset after the last complete line)."""
    from factbank_client.history import codex, lines

    state = _state().load(session.session_id, "timeline")
    start = int(state.get("offset") or 0) if state.get("path") == path else 0
    try:
        if os.path.getsize(path) < start:  # rewritten: read it again (keys dedupe)
            start = 0
        entries, end = lines(path, start)
    except OSError as exc:
        _log(f"timeline: cannot read the Codex rollout: {exc}")
        return [], None
    events = [e for _, entry in entries for e in codex.item_events(session, entry)]
    return events, {"path": path, "offset": end}


def events_for(event: str, data: dict) -> tuple[list[dict], Any]:
    """The timeline events one hook event reports, and the rollout offset to save."""
    if not data.get("session_id"):
        return [], None
    agent = agent_name(data)
    session = _session(data, agent)
    transcript = data.get("transcript_path")
    events: list[dict] = []
    saved = None
    if agent == "codex" and isinstance(transcript, str) and transcript:
        events, saved = _codex_rollout_events(session, transcript)
    elif event in ("PostToolUse", "PostToolUseFailure") and agent == "codex":
        events = _codex_payload_events(session, data)
    elif event in ("PostToolUse", "PostToolUseFailure"):
        from factbank_client.history import claude

        call = str(data.get("tool_use_id") or "") or None
        events = claude.tool_events(
            session, call, str(data.get("tool_name") or ""), data.get("tool_input"), _now(),
            data.get("cwd"), is_error=event == "PostToolUseFailure",
            error_text=str(data.get("error") or ""))
    if event == "SessionEnd":
        events.append(session.end(_now()))
    return events, saved


# --- the buffer and the service -----------------------------------------------------------


def timeline_bank(cfg: Any) -> str | None:
    """Where the timeline goes: the team bank (teammates coordinate there), else personal."""
    if "team" in cfg.tokens:
        return "team"
    if "personal" in cfg.tokens:
        return "personal"
    return next(iter(cfg.tokens), None)


def append(path: str, events: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = "".join(lightjson.dumps(e, ensure_ascii=False) + "\n" for e in events).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o600)
    try:
        os.write(fd, data)  # one write: appends of concurrent hooks do not interleave
    finally:
        os.close(fd)


def _lock(path: str, wait: bool) -> int | None:
    """The buffer's lock (an flock on `<buffer>.lock`), or None when `wait` is false and
    another hook holds it."""
    import fcntl

    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        return None
    return fd


def flush(cfg: Any, bank: str, path: str, deadline: float) -> dict[str, list[str]]:
    """Send the buffer (holding its lock); what the service does not take stays buffered.
    Returns the conflict warnings the answers carried, per session id. A few rounds, so the
    events other hooks appended meanwhile go too."""
    from factbank_client import minihttp

    warnings: dict[str, list[str]] = {}
    for _ in range(3):
        sent_all = _send(cfg, bank, path, deadline, minihttp, warnings)
        if not sent_all or not os.path.exists(path) or time.monotonic() > deadline:
            break
    return warnings


def _take(path: str) -> list[bytes]:
    """The lines to send: what an earlier send left (`.sending`) plus the buffer, taken with
    a rename so later appends start a new buffer."""
    sending = path + ".sending"
    if os.path.exists(path):
        taken = path + ".taking"
        os.replace(path, taken)
        with open(taken, "rb") as src:
            new = src.read()
        fd = os.open(sending, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o600)
        try:
            os.write(fd, new)
        finally:
            os.close(fd)
        os.remove(taken)
    try:
        with open(sending, "rb") as fh:
            return [ln for ln in fh.read().splitlines() if ln.strip()]
    except FileNotFoundError:
        return []


def _send(cfg: Any, bank: str, path: str, deadline: float, minihttp: Any,
          warnings: dict[str, list[str]]) -> bool:
    sending = path + ".sending"
    lines = _take(path)
    if not lines:
        return True
    if len(lines) > MAX_BUFFER_LINES:
        _log(f"timeline buffer over {MAX_BUFFER_LINES} events: dropped the oldest "
             f"{len(lines) - MAX_BUFFER_LINES}")
        lines = lines[-MAX_BUFFER_LINES:]
    events = []
    for ln in lines:
        try:
            events.append(lightjson.loads(ln))
        except ValueError:
            _log("timeline buffer: dropped a line that is not JSON")
    url = cfg.url + "/v1/timeline/events"
    headers = {"Authorization": f"Bearer {cfg.tokens[bank]}",
               "X-Factbank-Agent": str(events[0].get("agent") or "hook") if events else "hook"}
    sent = 0
    try:
        while sent < len(events):
            batch = events[sent:sent + MAX_BATCH]
            answer = minihttp.post_json(url, {"events": batch}, headers, deadline)
            sent += len(batch)
            for c in (answer.get("conflicts") or []) if isinstance(answer, dict) else []:
                if isinstance(c, dict) and isinstance(c.get("warning"), str):
                    warnings.setdefault(str(c.get("session_id") or ""), []).append(
                        c["warning"])
    except Exception as exc:
        status = str(exc)[5:8] if str(exc).startswith("HTTP ") else ""
        if status.startswith("4") and status not in ("401", "403", "408", "429"):
            _log(f"timeline: {len(events) - sent} events refused, dropped: {exc}")
            sent = len(events)  # refused as malformed: retrying would fail forever
        else:
            _log(f"timeline: {len(events) - sent} events kept for later: {exc}")
    rest = events[sent:]
    if rest:
        from factbank_client import safefs

        safefs.write(sending, "".join(lightjson.dumps(e, ensure_ascii=False) + "\n"
                                      for e in rest), private=True)
        return False
    os.remove(sending)
    return True


# --- conflicts left for the session's next hook --------------------------------------------


def conflict_text(warnings: list[str]) -> str:
    if not warnings:
        return ""
    from factbank_common.inert import inert

    return "\n".join([CONFLICT_HEADER, *(inert(f"- {w}") for w in warnings[:MAX_WARNINGS])])


def _warnings_of(output: bytes) -> list[str]:
    if not output:  # the usual case, answered without lightjson's slow (json) error path
        return []
    try:
        text = lightjson.loads(output)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        return []
    return [ln[2:] for ln in str(text).splitlines() if ln.startswith("- ")]


def leave_pending(session: str, warnings: list[str]) -> None:
    """Leave `warnings` (with any not yet shown) for the session's next hook, as the exact
    PostToolUse output (the hook prints it without parsing it)."""
    from factbank_client.hook import pending

    safe = pending.safe_name(session)
    path = pending.pending_path(safe)
    earlier = _warnings_of(pending.take_pending(safe))
    merged = list(dict.fromkeys([*warnings, *earlier]))[:MAX_WARNINGS]
    out = {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                  "additionalContext": conflict_text(merged)}}
    from factbank_client import safefs

    safefs.write(path, lightjson.dumps(out, ensure_ascii=True), private=True)


def take_warnings(session_id: str) -> str:
    """The conflict warning this session's edits left and no hook has shown yet ("" if
    none), for the prompt hook's output."""
    from factbank_client.hook import pending

    return conflict_text(_warnings_of(pending.take_pending(pending.safe_name(session_id))))


# --- the entry points ------------------------------------------------------------------


def process(event: str, raw: bytes, at: float | None = None) -> None:
    """A recording hook's work, in the forked child: the events buffered, the buffer sent,
    the conflicts left for the session's next hook. `at`: when the hook ran (time.time()).
    Never raises; bounded by an alarm."""
    import signal

    if at is not None:
        HOOK_TIME.append(at)

    signal.alarm(CHILD_DEADLINE)  # SIGALRM's default action ends the process
    try:
        data = lightjson.loads(raw.decode("utf-8")) if raw.strip() else {}
        if not isinstance(data, dict):
            raise ValueError(f"hook input is {type(data).__name__}, not an object")
        from factbank_client import config

        cfg = config.load()
        bank = timeline_bank(cfg)
        if bank is None:
            return
        path = buffer_path()
        lock = _lock(path, wait=True)
        try:
            events, saved = events_for(event, data)
            if events:
                append(path, events)
            if saved is not None:
                _state().save(str(data["session_id"]), saved, "timeline")
            found = flush(cfg, bank, path, time.monotonic() + SEND_BUDGET)
        finally:
            if lock is not None:
                os.close(lock)
        for session, warnings in found.items():
            if session:
                leave_pending(session, warnings)
    except Exception as exc:
        _log(f"{event}: {type(exc).__name__}: {exc}")
    finally:
        # Disarmed on the way out: where this runs in the hook's own process (no fork) or in
        # a test, a pending alarm would end that process CHILD_DEADLINE seconds later.
        signal.alarm(0)


def buffered() -> bool:
    """Events wait in the buffer (the service was down, or another hook is sending)."""
    path = buffer_path()
    return os.path.exists(path) or os.path.exists(path + ".sending")


def record_session_start(data: dict, deadline: float) -> None:
    """The session's start (agent, machine, branch, cwd relative to the repo root), sent
    before the session block is asked for, so a handoff for this agent finds it; within
    FLUSH_BUDGET, and buffered when the service does not take it."""
    try:
        if not data.get("session_id"):
            return
        from factbank_client import config

        cfg = config.load()
        bank = timeline_bank(cfg)
        if bank is None:
            return
        path = buffer_path()
        append(path, [_session(data, agent_name(data)).start(_now())])
        end = min(deadline, time.monotonic() + FLUSH_BUDGET)
        lock = _lock(path, wait=False)
        while lock is None and time.monotonic() < end - 0.05:
            time.sleep(0.01)  # a recording child is sending: it is done in a moment
            lock = _lock(path, wait=False)
        if lock is None:
            return  # still busy: the event stays buffered for the next send
        try:
            flush(cfg, bank, path, end)
        finally:
            os.close(lock)
    except Exception as exc:  # recording is optional; the session block is not
        _log(f"timeline session start: {exc}")
