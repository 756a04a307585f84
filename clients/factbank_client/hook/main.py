"""The hook events that answer the session: `session-start`, `user-prompt-submit`, `stop`.

Run through `hooks.py` (the entry the installer registers), imported from bytecode:

* `session-start` -> records the session's start on the timeline (within 0.2 s, before the
  block is asked for, so a handoff for this agent finds it), then the session-start block
  (`POST /v1/inject`, kind "session");
* `user-prompt-submit` -> the per-prompt block (kind "prompt"), after the conflict warning an
  edit of this session left (`hookrecord.take_warnings`), and one more prompt counted;
* `stop` -> after about every 5 prompts without a save, ONE reminder (`decision: block`)
  to save what was learned; never while the stop is already hook-driven (`stop_hook_active`),
  so it cannot loop (Codex would loop forever). For Codex it also starts the recording of the
  turn's edits from its rollout (Codex fires no PostToolUse for apply_patch).

Why it is built like this (docs/principles.md#hooks-never-hurt-the-session, "hooks never hurt the
session"):

* It always exits 0 and prints nothing but one JSON object both harnesses accept, validated
  against Codex's strict schemas (unknown keys fail the hook; Stop has no
  `hookSpecificOutput`). Nothing at all is printed when there is nothing to inject: Claude
  Code would inject stray text verbatim.
* A hard deadline (`FACTBANK_HOOK_TIMEOUT`, default 0.9 s, enforced by an interval timer as
  well as socket timeouts) bounds it when the service is down, slow, or stdin never closes.
* Errors go to `~/.cache/factbank/hooks.log`, never to stdout.
* Standard library only (config.py's tomllib, a raw-socket HTTP POST): a hook runs as a new
  process on every prompt, and importing httpx or urllib.request would cost more than the rest.
"""

from __future__ import annotations

import os
import sys
import time

from factbank_client import lightjson
from factbank_client.hook.record import agent_name
from factbank_client.settings import settings

TYPE_CHECKING = False  # not `from typing import ...`: typing costs ~5 ms at every prompt
if TYPE_CHECKING:
    from typing import Any

STARTED = time.monotonic()
REMIND_EVERY = 5
MAX_PROMPT_CHARS = 8000
MAX_TRANSCRIPT_SCAN = 4 * 1024 * 1024

EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "stop": "Stop",
}

REMINDER = (
    "factbank reminder (shown once, about every 5 prompts without a save): if this session "
    "established anything durable and verified - a decision and its reason, a command, a "
    "host/port/path, an error and its fix, a user preference - save it now with factbank's "
    "add tool: one atomic fact each, honest origin, a real source and a verbatim quote, tags "
    "naming the topic and systems, and 2-4 questions a teammate would ask, both in English "
    "and Chinese. If an injected fact proved wrong, dispute or supersede it by id. Never store "
    "secrets. If nothing qualifies, stop without answering this reminder."
)

# A save in the transcript (factbank's MCP tools `add` / `supersede`; seen in the real files):
# Claude Code logs a tool_use named `mcp__factbank__add`; Codex logs a function_call with
# `"name":"add","namespace":"mcp__factbank"`. Compiled only by the Stop hook.
SAVE_TOOL = r"(?:add|supersede)(?![A-Za-z0-9_])"
SAVE_REGEXES = (
    rb"mcp__factbank__" + SAVE_TOOL.encode(),  # Claude Code, Qwen Code
    rb'"name"\s*:\s*"' + SAVE_TOOL.encode() + rb'"[^\n]{0,400}?mcp__factbank',
    rb'mcp__factbank"[^\n]{0,400}?"name"\s*:\s*"' + SAVE_TOOL.encode() + rb'"',
    # Gemini CLI's chat file (`functionCall` name) and Copilot CLI's events.jsonl
    # (`tool.execution_start` toolName). Calls only: Copilot's transcript also holds the
    # system prompt, whose tool list names `factbank-add` (seen: the reminder never came).
    rb'"name"\s*:\s*"mcp_factbank_' + SAVE_TOOL.encode() + rb'"',
    rb'"toolName"\s*:\s*"factbank-' + SAVE_TOOL.encode() + rb'"',
)


def save_patterns() -> list:
    import re

    return [re.compile(p) for p in SAVE_REGEXES]


def _state() -> Any:  # imported when first needed
    from factbank_client.hook import state as hookstate

    return hookstate


def _log(message: str) -> None:
    _state().log(message)


class Deadline(BaseException):
    """Raised by the interval timer: BaseException so no `except Exception` swallows it."""


def process_age() -> float:
    """Seconds since this process started (Linux: /proc), so the deadline also covers the
    interpreter's own start-up, which a loaded machine can stretch to 100+ ms."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return min(max(age, 0.0), 0.5)
    except (OSError, ValueError, IndexError):
        return 0.0


def event_name(arg: str) -> str | None:
    key = arg.strip().replace("_", "-")
    if key in EVENTS:
        return EVENTS[key]
    return arg if arg in EVENTS.values() else None


# --- the service ---------------------------------------------------------------------------


# With a recognised correction, each bank names the prompt's top hit (`subject`); kept here.
SUBJECTS: dict[str, int] = {}


def inject(kind: str, session_id: str, project: str | None, prompt: str | None,
           agent: str, deadline: float, root: str | None = None,
           correction: bool = False) -> str:
    """The merged injection text from every configured bank ("" when nothing qualifies or
    nothing answered in time). Banks are asked in parallel; a failing bank is logged and
    skipped. Texts are joined in bank order, personal first, like client.merge_injections.

    With `root` (the repository the session works in), each block's facts that quote a file
    of this project are checked against that working tree first (`checked`)."""
    from factbank_client import config, minihttp

    cfg = config.load()
    banks = cfg.banks
    if not banks:
        return ""
    body = {"kind": kind, "session_id": session_id, "project": project, "prompt": prompt,
            "banks": len(banks)}  # the server gives each bank its share of the budget
    if correction:
        body["correction"] = True
    url = cfg.recall_url + "/v1/inject"
    answers: dict[str, str] = {}
    replies: dict[str, dict] = {}
    withheld = _state().load(session_id, "withheld") if root else {}

    from factbank_client import written

    def ask(bank: str) -> None:
        headers = {"Authorization": f"Bearer {cfg.tokens[bank]}", "X-Factbank-Agent": agent,
                   **written.headers(cfg.url, bank)}  # read-your-writes over a replica
        held = _ids(withheld.get(bank))
        try:
            data = minihttp.post_json(url, {**body, "withheld": held} if held else body,
                                      headers, deadline)
            text = data.get("text") if isinstance(data, dict) else None
            if isinstance(text, str) and text.strip():
                answers[bank] = text.strip()
                replies[bank] = data
            if correction and isinstance(data, dict) and type(data.get("subject")) is int:
                SUBJECTS[bank] = data["subject"]
        except Exception as exc:  # one bank failing must not stop the others
            _log(f"inject {kind} bank={bank}: {exc}")

    if len(banks) == 1:
        ask(banks[0])
    else:
        import threading

        threads = [threading.Thread(target=ask, args=(b,), daemon=True) for b in banks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    if root is not None and any(r.get("sources") for r in replies.values()):
        checked(answers, replies, withheld, root, session_id, deadline)
    return "\n\n".join(answers[b] for b in banks if b in answers)


CHECK_MARGIN = 0.05  # seconds of the deadline the working-tree check needs; else it is skipped


def checked(answers: dict, replies: dict, withheld: dict, root: str, session_id: str,
            deadline: float) -> None:
    """Verify before inject (worktree.py): each bank's block loses the facts whose quote this
    working tree no longer has, and names them. Their ids are kept in the session's
    "withheld" state and sent with the next blocks, so the bank does not count them as seen:
    a fact left out during an uncommitted edit comes back once the edit is reverted. The bank
    is told nothing else (only a commit is evidence for the team)."""
    if deadline - time.monotonic() < CHECK_MARGIN:
        _log("inject: no time left for the working-tree check; blocks shown unchecked")
        return
    from factbank_client.staleness import worktree

    left = worktree.check_answers(replies, root)
    changed = False
    for bank, data in replies.items():
        answers[bank] = str(data.get("text") or "").strip()
        out = left.get(bank, [])
        shown = {i for i in data.get("facts") or () if isinstance(i, int)}
        before = _ids(withheld.get(bank))
        now = list(dict.fromkeys([*(i for i in before if i not in shown), *out]))[-200:]
        if now != before:
            withheld[bank] = now
            changed = True
    if changed:
        _state().save(session_id, {b: ids for b, ids in withheld.items() if ids}, "withheld")


def _ids(value: object) -> list[int]:
    """The fact ids a state file holds for a bank (anything else in it is ignored: a bad
    `withheld` would cost that bank its block, a 400)."""
    if not isinstance(value, list):
        return []
    return [i for i in value if isinstance(i, int) and not isinstance(i, bool) and i > 0][-200:]


def root_of(data: dict) -> str | None:
    """The repository the session works in, for the working-tree check (None outside one,
    or with FACTBANK_INJECT_CHECK=0)."""
    if not settings.inject_check:
        return None
    from factbank_client.project import root_dir

    cwd = data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        return root_dir(cwd)
    except OSError:
        return None


def project_of(data: dict) -> str | None:
    from factbank_client.project import project_key

    cwd = data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        return project_key(cwd)
    except OSError:
        return None


# --- the events ----------------------------------------------------------------------------


def context_output(event: str, text: str) -> dict | None:
    """The hook's answer. Every line of `text` (the services' blocks, the conflict warnings)
    passes `inert` here, the one place all hook output goes through: split on LF only, so a
    U+2028 or CR that a bank's text (or an older server) carried is escaped, not obeyed."""
    if not text:
        return None
    from factbank_common.inert import inert_lines

    text = inert_lines(text)
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def on_session_start(data: dict, deadline: float) -> dict | None:
    session_id = str(data.get("session_id") or "")
    if not session_id:
        return None
    _state().prune()
    if "factbank_agent" in data:  # a harness whose prompt hook may have to start it (above)
        state = _state().load(session_id)
        state["started"] = True
        _state().save(session_id, state)
    if settings.timeline:
        from factbank_client.hook import record as hookrecord

        hookrecord.record_session_start(data, deadline)
    from factbank_client import sessionid

    sessionid.mark(session_id)  # so the agent's MCP and CLI writes name this session
    text = inject("session", session_id, project_of(data), None, agent_name(data), deadline,
                  root_of(data))
    from factbank_client.hook import verify as hookverify

    if hookverify.wanted(str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or "")):
        # This project's file-sourced facts are checked after the output, in the background
        # (hookverify.py): facts that turn stale are named by the next session's block.
        AFTER.append(("Verify", lightjson.dumps(data).encode("utf-8")))
    return context_output("SessionStart", text)


def on_user_prompt_submit(data: dict, deadline: float) -> dict | None:
    session_id = str(data.get("session_id") or "")
    prompt = data.get("prompt")
    if not session_id or not isinstance(prompt, str):
        return None
    state = _state().load(session_id)
    # Qwen Code fires this again with an empty prompt after every tool round: not a prompt.
    late_start = "factbank_agent" in data and not state.get("started")
    carried = str(state.pop("carry", "") or "")  # a reminder OpenCode could not show at stop
    if prompt.strip():
        state["prompts"] = int(state.get("prompts") or 0) + 1
    if late_start:
        state["started"] = True
    _state().save(session_id, state)
    from factbank_client.hook import record as hookrecord

    told = hookrecord.take_warnings(session_id)  # left by this session's last edit
    if hookrecord.buffered():  # the service was down: send it now, in the background
        AFTER.append(("Flush", b""))
    start = ""
    if late_start:
        # No SessionStart came first (Qwen Code fires none in `-p` mode): its block (and
        # handoffs) come with the first prompt instead.
        started = on_session_start(data, deadline)
        start = ((started or {}).get("hookSpecificOutput") or {}).get("additionalContext", "")
    if not prompt.strip():
        return context_output("UserPromptSubmit",
                              "\n\n".join(t for t in (start, told, carried) if t))
    from factbank_client import sessionid
    from factbank_client.hook import correction

    sessionid.mark(session_id)
    corrects = correction.is_correction(prompt)
    text = inject("prompt", session_id, project_of(data), prompt[:MAX_PROMPT_CHARS],
                  agent_name(data), deadline, root_of(data), correction=corrects)
    if corrects:  # one line: save it quoting the user, or supersede the fact named
        text = "\n\n".join(t for t in (text, correction.nudge(
            next(iter(SUBJECTS.values()), None))) if t)
    return context_output("UserPromptSubmit",
                          "\n\n".join(t for t in (start, told, text, carried) if t))


def saved_since(state: dict, transcript_path: Any) -> bool:
    """Did the transcript gain a factbank save call since the last look? Reads only the bytes
    appended since then (the offset is kept in the session state), at most a few MB."""
    if not isinstance(transcript_path, str) or not transcript_path:
        return False
    try:
        with open(transcript_path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            offset = int(state.get("offset") or 0)
            if offset > size:  # rotated or rewritten: start over
                offset = 0
            start = max(offset, size - MAX_TRANSCRIPT_SCAN)
            fh.seek(start)
            new = fh.read(size - start)
    except OSError:
        return False
    state["offset"] = size
    # Every pattern holds "factbank": without it in the new bytes none can match, and `re`
    # (7.6 ms of CPU in a fresh process, with the enum it brings) is never imported.
    return b"factbank" in new and any(p.search(new) for p in save_patterns())


def on_stop(data: dict, deadline: float) -> dict | None:
    del deadline
    session_id = str(data.get("session_id") or "")
    if not session_id or data.get("stop_hook_active") is not False:
        # Hook-driven stop (or a payload we do not understand): never block, never loop.
        return None
    state = _state().load(session_id)
    if saved_since(state, data.get("transcript_path")):
        state["prompts"] = 0
    reminder = None
    if int(state.get("prompts") or 0) >= REMIND_EVERY:
        state["prompts"] = 0
        state["reminders"] = int(state.get("reminders") or 0) + 1
        reminder = {"decision": "block", "reason": REMINDER}
        if data.get("factbank_agent") == "opencode":
            # Its plugin cannot block the stop: the session's next prompt carries it.
            state["carry"], reminder = REMINDER, None
    _state().save(session_id, state)
    if agent_name(data) == "codex" and isinstance(data.get("transcript_path"), str):
        AFTER.append(("Stop", lightjson.dumps(data).encode("utf-8")))  # its edits fire no hook
    return reminder


# Recording work an event leaves for a detached child, started by `entry.main` once `main`
# has written the output (entry.detach hands the hook's pipes to /dev/null first).
AFTER: list[tuple[str, bytes]] = []

HANDLERS = {
    "SessionStart": on_session_start,
    "UserPromptSubmit": on_user_prompt_submit,
    "Stop": on_stop,
}


def run(event: str, raw: bytes, deadline: float, harness: str | None = None) -> dict | None:
    """The output object for one event, or None. Raises on garbage (the caller logs it).
    `harness` (Gemini CLI, Qwen Code, Copilot CLI): its payload and output are translated
    (hookadapt)."""
    data = lightjson.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"hook input is {type(data).__name__}, not an object")
    if harness is None:
        return HANDLERS[event](data, deadline)
    from factbank_client.hook import adapt as hookadapt

    event, data = hookadapt.normalize(harness, event, data)
    return hookadapt.render(harness, event, HANDLERS[event](data, deadline))


_armed = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise Deadline()


def main(argv: list[str] | None = None) -> int:
    """Run one hook event; always returns 0 and prints at most one valid JSON object."""
    global _armed
    argv = sys.argv[1:] if argv is None else argv
    event = event_name(argv[0]) if argv else None
    harness = None
    if len(argv) > 1:
        from factbank_client.hook.adapt import harness_of

        harness = harness_of(argv)
    limit = settings.hook_timeout  # a bad value reads as the default (settings._Seconds)
    deadline = STARTED - process_age() + limit
    # `threading` is not imported for this: a hook always runs on its main thread.
    # `_signal`, not `signal`: signal wraps the same calls in IntEnums (`enum`, 5 ms CPU).
    import _signal

    timer = hasattr(_signal, "setitimer")
    out: dict | None = None
    try:
        if timer:
            _signal.signal(_signal.SIGALRM, _on_alarm)
            _armed = True
            _signal.setitimer(_signal.ITIMER_REAL, max(0.01, deadline - time.monotonic()))
        if event is None:
            raise ValueError(f"unknown hook event {argv[:1]!r}")
        out = run(event, sys.stdin.buffer.read(), deadline, harness)
    except Deadline:
        _log(f"{event}: gave up after {limit:.2f}s")
        out = None
    except BaseException as exc:  # a hook must never fail the session
        _log(f"{event}: {type(exc).__name__}: {exc}")
        out = None
    finally:
        _armed = False
        if timer:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    if out is not None:
        try:
            sys.stdout.write(lightjson.dumps(out, ensure_ascii=True))
            sys.stdout.flush()
        except Exception as exc:  # e.g. the harness closed the pipe
            _log(f"{event}: cannot write output: {exc}")
    return 0
