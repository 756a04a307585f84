"""Claude Code and Codex command hooks: `python -I -S /path/to/factbank_client/hooks.py <event>`.

Events (the argument; PascalCase or kebab-case):

* `session-start`  -> the session-start block (`POST /v1/inject`, kind "session");
* `user-prompt-submit` -> the per-prompt block (kind "prompt") and one more prompt counted;
* `stop` -> after about every 5 prompts without a save, ONE reminder (`decision: block`)
  to save what was learned; never while the stop is already hook-driven (`stop_hook_active`),
  so it cannot loop (Codex would loop forever).

Why it is built like this (principle 7, "hooks never hurt the session"):

* It always exits 0 and prints nothing but one JSON object both harnesses accept, validated
  against Codex's strict schemas (unknown keys fail the hook; Stop has no
  `hookSpecificOutput`). Nothing at all is printed when there is nothing to inject: Claude
  Code would inject stray text verbatim.
* A hard deadline (`FACTBANK_HOOK_TIMEOUT`, default 0.9 s, enforced by an interval timer as
  well as socket timeouts) bounds it when the service is down, slow, or stdin never closes.
* Errors go to `~/.cache/factbank/hooks.log`, never to stdout.
* Standard library only (config.py's tomllib, a raw-socket HTTP POST): a hook runs as a new
  process on every prompt, and importing httpx or urllib.request would cost more than the rest.
  For the same reason it runs as a script under `-I -S`: no `site` (site-packages .pth files,
  editable-install finders cost 50-100 ms on a loaded machine), no PYTHON* variables, no cwd
  on sys.path; the `__main__` block puts the package's parent directory on sys.path itself.
  `python -m factbank_client.hooks <event>` works too, just slower.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

TYPE_CHECKING = False  # not `from typing import ...`: typing costs ~5 ms at every prompt
if TYPE_CHECKING:
    from typing import Any

STARTED = time.monotonic()
DEFAULT_BUDGET = 0.9
REMIND_EVERY = 5
MAX_PROMPT_CHARS = 8000
MAX_TRANSCRIPT_SCAN = 4 * 1024 * 1024

EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "stop": "Stop",
    "post-tool-use": "PostToolUse",
    "session-end": "SessionEnd",
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
    rb"mcp__factbank__" + SAVE_TOOL.encode(),
    rb'"name"\s*:\s*"' + SAVE_TOOL.encode() + rb'"[^\n]{0,400}?mcp__factbank',
    rb'mcp__factbank"[^\n]{0,400}?"name"\s*:\s*"' + SAVE_TOOL.encode() + rb'"',
)


def save_patterns() -> list:
    import re

    return [re.compile(p) for p in SAVE_REGEXES]


def _state() -> Any:  # imported lazily: see the __main__ block
    from factbank_client import hookstate

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


def budget() -> float:
    try:
        return max(0.05, float(os.environ.get("FACTBANK_HOOK_TIMEOUT", DEFAULT_BUDGET)))
    except ValueError:
        return DEFAULT_BUDGET


def event_name(arg: str) -> str | None:
    key = arg.strip().replace("_", "-")
    if key in EVENTS:
        return EVENTS[key]
    return arg if arg in EVENTS.values() else None


def agent_name(data: dict) -> str:
    if os.environ.get("CLAUDECODE") or os.environ.get("CLAUDE_PROJECT_DIR"):
        return "claude"
    if "turn_id" in data or "model" in data:
        return "codex"
    return "hook"


# --- the service ---------------------------------------------------------------------------


def inject(kind: str, session_id: str, project: str | None, prompt: str | None,
           agent: str, deadline: float) -> str:
    """The merged injection text from every configured bank ("" when nothing qualifies or
    nothing answered in time). Banks are asked in parallel; a failing bank is logged and
    skipped. Texts are joined in bank order, personal first, like client.merge_injections."""
    from factbank_client import config, minihttp

    cfg = config.load()
    banks = cfg.banks
    if not banks:
        return ""
    body = {"kind": kind, "session_id": session_id, "project": project, "prompt": prompt,
            "banks": len(banks)}  # the server gives each bank its share of the budget
    url = cfg.recall_url + "/v1/inject"
    answers: dict[str, str] = {}

    def ask(bank: str) -> None:
        headers = {"Authorization": f"Bearer {cfg.tokens[bank]}", "X-Factbank-Agent": agent}
        try:
            data = minihttp.post_json(url, body, headers, deadline)
            text = data.get("text") if isinstance(data, dict) else None
            if isinstance(text, str) and text.strip():
                answers[bank] = text.strip()
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
    return "\n\n".join(answers[b] for b in banks if b in answers)


def project_of(data: dict) -> str | None:
    from factbank_client.project import project_key

    cwd = data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    try:
        return project_key(cwd)
    except OSError:
        return None


# --- the events ----------------------------------------------------------------------------


def context_output(event: str, text: str) -> dict | None:
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def on_session_start(data: dict, deadline: float) -> dict | None:
    session_id = str(data.get("session_id") or "")
    if not session_id:
        return None
    _state().prune()
    if os.environ.get("FACTBANK_TIMELINE", "1") != "0":
        record_session_start(data, deadline)
    text = inject("session", session_id, project_of(data), None, agent_name(data), deadline)
    return context_output("SessionStart", text)


def on_user_prompt_submit(data: dict, deadline: float) -> dict | None:
    session_id = str(data.get("session_id") or "")
    prompt = data.get("prompt")
    if not session_id or not isinstance(prompt, str):
        return None
    state = _state().load(session_id)
    state["prompts"] = int(state.get("prompts") or 0) + 1
    _state().save(session_id, state)
    if not prompt.strip():
        return None
    text = inject("prompt", session_id, project_of(data), prompt[:MAX_PROMPT_CHARS],
                  agent_name(data), deadline)
    return context_output("UserPromptSubmit", text)


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
    return any(p.search(new) for p in save_patterns())


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
    _state().save(session_id, state)
    return reminder


# --- the timeline (issue 15): what this session touched, never facts ----------------------
#
# A recording hook never waits for the service: the event is appended to a local buffer
# (JSONL, 0600, bounded at MAX_BUFFER_LINES: the oldest are dropped, and counted in hooks.log),
# then ONE hook at a time (a non-blocking flock) sends the whole buffer with a short deadline
# (FLUSH_BUDGET). What is not accepted stays buffered and goes with the next event, so a
# service that is down loses nothing within the bound. A file event's answer carries the
# conflicts (another session touched that file within the window): shown at once, in the
# PostToolUse hook's additional context.

FILE_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path"}
SHELL_TOOLS = {"Bash", "shell", "exec_command", "local_shell"}
PATCH_TOOLS = {"apply_patch"}
FLUSH_BUDGET = 0.3
MAX_BUFFER_LINES = 2000
MAX_BATCH = 500
MAX_COMMAND_CHARS = 4000


def buffer_path() -> str:
    return os.path.join(_state().cache_dir(), "timeline-buffer.jsonl")


def _now_iso() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}+00:00"


def _root(cwd: str) -> str | None:
    from factbank_client.project import repo_root

    try:
        root = repo_root(__import__("pathlib").Path(cwd))
    except OSError:
        return None
    return str(root) if root is not None else None


def _relative(path: str, root: str | None, cwd: str) -> str:
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    full = os.path.normpath(full)
    if root:
        rel = os.path.relpath(full, root)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return path


def _branch(root: str | None) -> str:
    """The checked-out branch, read from HEAD (no git subprocess); "" when detached."""
    if not root:
        return ""
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):  # a worktree: "gitdir: <path>"
            with open(git, encoding="utf-8") as fh:
                target = fh.read().strip().removeprefix("gitdir:").strip()
            git = os.path.normpath(os.path.join(root, target))
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else ""


def _base_event(data: dict, kind: str) -> tuple[dict, str | None, str]:
    cwd = str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())
    root = _root(cwd)
    event = {"session_id": str(data.get("session_id") or ""), "kind": kind,
             "project": project_of(data), "agent": agent_name(data), "at": _now_iso()}
    return event, root, cwd


def _patch_paths(tool_input: Any) -> list[str]:
    text = tool_input
    if isinstance(tool_input, dict):
        text = tool_input.get("input") or tool_input.get("patch") or tool_input.get("command")
    if isinstance(text, list):
        text = "\n".join(str(t) for t in text)
    if not isinstance(text, str):
        return []
    import re

    return re.findall(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", text, re.M)


def _exit_code(response: Any) -> int | None:
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode", "returncode", "code"):
            value = response.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def tool_events(data: dict) -> list[dict]:
    """The timeline events of one PostToolUse: a file touched (edit/write tools, a patch's
    files) or a command run (shell tools). Other tools record nothing."""
    tool = str(data.get("tool_name") or "")
    tool_input = data.get("tool_input")
    if not data.get("session_id"):
        return []
    events: list[dict] = []
    if tool in FILE_TOOLS or tool in PATCH_TOOLS:
        if tool in FILE_TOOLS:
            path = tool_input.get(FILE_TOOLS[tool]) if isinstance(tool_input, dict) else None
            paths = [path] if isinstance(path, str) and path else []
        else:
            paths = _patch_paths(tool_input)
        for path in paths[:20]:
            event, root, cwd = _base_event(data, "file")
            event.update(path=_relative(path, root, cwd), tool=tool)
            events.append(event)
    elif tool in SHELL_TOOLS:
        command = tool_input.get("command") if isinstance(tool_input, dict) else tool_input
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str) and command.strip():
            event, _, _ = _base_event(data, "command")
            event.update(command=command[:MAX_COMMAND_CHARS], tool=tool)
            code = _exit_code(data.get("tool_response"))
            if code is not None:
                event["exit_code"] = code
            events.append(event)
    return events


def _timeline_bank(cfg: Any) -> str | None:
    if "team" in cfg.tokens:
        return "team"
    if "personal" in cfg.tokens:
        return "personal"
    return next(iter(cfg.tokens), None)


def _append(path: str, events: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)  # one write: appends of concurrent hooks do not interleave
    finally:
        os.close(fd)


def record(events: list[dict], deadline: float) -> list[str]:
    """Buffer `events`, then send the buffer (this hook's and any earlier ones) within the
    flush budget. Returns the conflict warnings the service answered ([] when none, when
    another hook is sending, or when the service did not answer in time)."""
    from factbank_client import config, minihttp

    cfg = config.load()
    bank = _timeline_bank(cfg)
    if bank is None:
        return []
    path = buffer_path()
    if events:
        _append(path, events)
    import fcntl

    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []  # another hook is sending; this event goes with it or the next one
        return _flush(cfg, bank, path, min(deadline, time.monotonic() + FLUSH_BUDGET),
                      minihttp)
    finally:
        os.close(lock)


def _flush(cfg: Any, bank: str, path: str, deadline: float, minihttp: Any) -> list[str]:
    sending = path + ".sending"
    if os.path.exists(path):
        taken = path + ".taking"
        os.replace(path, taken)  # later appends start a new buffer
        with open(taken, "rb") as src:
            new = src.read()
        fd = os.open(sending, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, new)
        finally:
            os.close(fd)
        os.remove(taken)
    try:
        with open(sending, "rb") as fh:
            lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    except FileNotFoundError:
        return []
    if len(lines) > MAX_BUFFER_LINES:
        _log(f"timeline buffer over {MAX_BUFFER_LINES} events: dropped the oldest "
             f"{len(lines) - MAX_BUFFER_LINES}")
        lines = lines[-MAX_BUFFER_LINES:]
    events = []
    for ln in lines:
        try:
            events.append(json.loads(ln))
        except ValueError:
            _log("timeline buffer: dropped a line that is not JSON")
    url = cfg.url + "/v1/timeline/events"
    headers = {"Authorization": f"Bearer {cfg.tokens[bank]}",
               "X-Factbank-Agent": str(events[0].get("agent") or "hook") if events else "hook"}
    warnings: list[str] = []
    sent = 0
    try:
        while sent < len(events):
            batch = events[sent:sent + MAX_BATCH]
            answer = minihttp.post_json(url, {"events": batch}, headers, deadline)
            sent += len(batch)
            for c in (answer.get("conflicts") or []) if isinstance(answer, dict) else []:
                if isinstance(c, dict) and isinstance(c.get("warning"), str):
                    warnings.append(c["warning"])
    except Exception as exc:
        status = str(exc)[5:8] if str(exc).startswith("HTTP ") else ""
        if status.startswith("4") and status not in ("401", "403", "408", "429"):
            _log(f"timeline: {len(events) - sent} events refused, dropped: {exc}")
            sent = len(events)  # refused as malformed: retrying would fail forever
        else:
            _log(f"timeline: {len(events) - sent} events kept for later: {exc}")
    rest = events[sent:]
    tmp = sending + ".tmp"
    if rest:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, "".join(json.dumps(e, ensure_ascii=False) + "\n"
                                 for e in rest).encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(tmp, sending)
    else:
        os.remove(sending)
    return warnings


def conflict_text(warnings: list[str]) -> str:
    if not warnings:
        return ""
    return "\n".join(["[factbank] Possible edit conflict (timeline, not facts):",
                      *(f"- {w}" for w in warnings[:5])])


def on_post_tool_use(data: dict, deadline: float) -> dict | None:
    events = tool_events(data)
    if not events:
        return None
    return context_output("PostToolUse", conflict_text(record(events, deadline)))


def on_session_end(data: dict, deadline: float) -> dict | None:
    if data.get("session_id"):
        event, _, _ = _base_event(data, "session_end")
        record([event], deadline)
    return None


def record_session_start(data: dict, deadline: float) -> None:
    """The session's start (agent, machine, branch, cwd relative to the repo root), recorded
    before the session block is asked for, so a handoff for this agent finds it."""
    import socket

    event, root, cwd = _base_event(data, "session_start")
    event.update(machine=socket.gethostname()[:200], branch=_branch(root),
                 cwd=_relative(cwd, root, cwd) if root else "")
    try:
        record([event], min(deadline, time.monotonic() + 0.2))
    except Exception as exc:  # recording is optional; the session block is not
        _log(f"timeline session start: {exc}")


HANDLERS = {
    "SessionStart": on_session_start,
    "UserPromptSubmit": on_user_prompt_submit,
    "Stop": on_stop,
    "PostToolUse": on_post_tool_use,
    "SessionEnd": on_session_end,
}


def run(event: str, raw: bytes, deadline: float) -> dict | None:
    """The output object for one event, or None. Raises on garbage (the caller logs it)."""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"hook input is {type(data).__name__}, not an object")
    return HANDLERS[event](data, deadline)


_armed = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise Deadline()


def main(argv: list[str] | None = None) -> int:
    """Run one hook event; always returns 0 and prints at most one valid JSON object."""
    global _armed
    argv = sys.argv[1:] if argv is None else argv
    event = event_name(argv[0]) if argv else None
    limit = budget()
    deadline = STARTED - process_age() + limit
    # `threading` is not imported for this: a hook always runs on its main thread.
    timer = hasattr(signal, "setitimer")
    out: dict | None = None
    try:
        if timer:
            signal.signal(signal.SIGALRM, _on_alarm)
            _armed = True
            signal.setitimer(signal.ITIMER_REAL, max(0.01, deadline - time.monotonic()))
        if event is None:
            raise ValueError(f"unknown hook event {argv[:1]!r}")
        out = run(event, sys.stdin.buffer.read(), deadline)
    except Deadline:
        _log(f"{event}: gave up after {limit:.2f}s")
        out = None
    except BaseException as exc:  # a hook must never fail the session
        _log(f"{event}: {type(exc).__name__}: {exc}")
        out = None
    finally:
        _armed = False
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
    if out is not None:
        try:
            sys.stdout.write(json.dumps(out, ensure_ascii=True))
            sys.stdout.flush()
        except Exception as exc:  # e.g. the harness closed the pipe
            _log(f"{event}: cannot write output: {exc}")
    return 0


if __name__ == "__main__":
    if not __package__:  # run as a script (`-I -S .../factbank_client/hooks.py`)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # os._exit: no interpreter teardown (faster), no lingering bank threads, and exit 0 even
    # if something escaped main().
    try:
        main()
        sys.stdout.flush()
    except BaseException:
        pass
    finally:
        os._exit(0)
