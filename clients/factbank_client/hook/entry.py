"""Claude Code and Codex command hooks, as `python -I -S /path/to/factbank_client/hooks.py
<event>` runs them (hooks.py only imports this module and calls `run`).

Events (the argument; PascalCase or kebab-case):

* `session-start`, `user-prompt-submit`, `stop`: the session-start block, the per-prompt
  block, the save reminder (`factbank_client.hook.main`);
* `post-tool-use`, `post-tool-use-failure`, `session-end`: recording the timeline (what the
  session touched and ran; `factbank_client.hook.record`).

hooks.py is a few lines on purpose: a script run as `python file.py` is compiled from source
on every run (only imported modules load from a .pyc), and compiling the 600-line hook module
took 53-77 ms on the loaded 2-core box, this one alone 10-28 ms, more than the interpreter's
own start. This module and everything an event needs load from cached bytecode.

A recording event never waits for the service (PostToolUse p50 <= 50 ms). This
process reads the payload, prints the conflict warning an earlier event of this session left
for it (`sessions/<id>.pending`, already the exact output JSON), hands its stdin, stdout and
stderr to /dev/null (so the harness sees EOF the moment it exits), forks, and exits. The
forked child (its own session, so the harness does not kill it with its process group) turns
the payload into timeline events, buffers them and sends the buffer. The parent imports
nothing but `pending` (what it prints, `os` alone): `os` is frozen in the interpreter, `sys`
loaded at start-up, `_signal` built in (`signal` would import `enum`), and not even `json`
(it brings `re`).

Why it is built like this (docs/principles.md#hooks-never-hurt-the-session, "hooks never hurt the
session"): it always exits 0,
prints nothing but one JSON object both harnesses accept (nothing at all when there is nothing
to say: Claude Code would inject stray text verbatim), errors go to `~/.cache/factbank/
hooks.log`, never to stdout, and a deadline bounds every wait. It runs under `-I -S`: no
`site` (site-packages .pth files and editable-install finders cost 50-100 ms on a loaded
machine), no PYTHON* variables, no cwd on sys.path; hooks.py puts the package's
parent directory on sys.path itself. `python -m factbank_client.hooks <event>` works too.
"""

import os  # no `from __future__ import annotations`: even that is a module to load
import sys

from factbank_client.hook.pending import safe_name, take_pending

# This module imports `main`, `record`, `verify`, `adapt` and `state` only inside the functions
# that need them (importing them at the top would cost the 53-77 ms compile and import time
# measured above), and none of them imports it back: what a recording child leaves for the
# next hook is in `pending` (which the parent here needs too), and the work an answering event
# leaves for later (`hookmain.AFTER`) is detached here, after `hookmain.main` returns. A
# recording event loads this module and `pending` alone (tests/unit/test_timeline_hooks.py).

RECORDING = {"post-tool-use": "PostToolUse", "post-tool-use-failure": "PostToolUseFailure",
             "session-end": "SessionEnd"}
NEXT_HARNESSES = ("gemini", "qwen", "copilot", "opencode")  # hookadapt.HARNESSES, unimported
READ_DEADLINE = 5.0  # seconds: a harness that never closes stdin costs no more


def event_of(arg: str) -> str:
    """`post-tool-use`, `post_tool_use` or `PostToolUse` -> `PostToolUse` (or the argument)."""
    key = arg.strip().replace("_", "-")
    if key in RECORDING:
        return RECORDING[key]
    return arg.strip()


def session_of(raw: bytes) -> str:
    """The session id without parsing JSON: Claude Code sets CLAUDE_CODE_SESSION_ID; both
    harnesses send `"session_id":"<uuid>"` (first, in the payloads seen). "" if not found."""
    sid = os.environ.get("CLAUDE_CODE_SESSION_ID", "")
    if not sid:
        for marker in (b'"session_id":"', b'"session_id": "', b'"sessionId":"',
                       b'"sessionId": "'):
            at = raw.find(marker)
            if at >= 0:
                start = at + len(marker)
                end = raw.find(b'"', start, start + 200)
                if end > start:
                    sid = raw[start:end].decode("ascii", "replace")
                break
    return safe_name(sid) if sid else ""


def detach(event: str, raw: bytes, harness: str = "") -> None:
    """Record `event` in a forked child that outlives this process; returns at once (in the
    parent), which then has nothing left to do but exit. Without fork, the work is done here.
    `harness` (Gemini CLI, Qwen Code, Copilot CLI) has the child read the payload in that
    harness's terms first (hookadapt).

    The hook's stdin, stdout and stderr go to /dev/null first, in this process, before the
    fork: the harness waits for EOF on the hook's pipes, and a child holding them until it is
    first scheduled cost the hook 80+ ms of wall time on the loaded box (p50 148 ms against
    the interpreter's 64; its CPU was 7 ms more)."""
    import time  # built in: the events carry when the hook ran, not when the child did

    at = time.time()
    try:
        sys.stdout.flush()
    except Exception:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    fork = getattr(os, "fork", None)
    if fork is not None:
        try:
            if fork():
                return  # the parent: the harness waits for nothing more
        except OSError:
            pass  # cannot fork: record here, within the hook
        else:
            try:
                os.setsid()  # outlive the harness's process group
                os.nice(10)  # background work: the harness and its agent come first
                if event == "Verify":  # becomes `factbank verify --quiet`
                    from factbank_client.hook import verify as hookverify

                    hookverify.run(raw)
                else:
                    from factbank_client.hook import record as hookrecord

                    if harness:
                        from factbank_client.hook import adapt as hookadapt

                        event, raw = hookadapt.adapt_raw(harness, event, raw)
                    hookrecord.process(event, raw, at)
            except BaseException as exc:
                try:
                    from factbank_client.hook import state as hookstate

                    hookstate.log(f"{event}: {type(exc).__name__}: {exc}")
                except BaseException:
                    pass
            finally:
                os._exit(0)
    if event == "Verify":
        return  # cannot fork: a verify never runs inside the hook
    from factbank_client.hook import record as hookrecord

    if harness:
        from factbank_client.hook import adapt as hookadapt

        event, raw = hookadapt.adapt_raw(harness, event, raw)
    hookrecord.process(event, raw, at)


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutError("stdin not closed in time")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    event = event_of(argv[0]) if argv else ""
    if event not in RECORDING.values():
        from factbank_client.hook import main as hookmain

        code = hookmain.main(argv)
        # The recording work the event left, once its output is written (detach hands the
        # hook's pipes to /dev/null first).
        while hookmain.AFTER:
            work, raw = hookmain.AFTER.pop(0)
            detach(work, raw)
        return code
    try:
        import _signal

        _signal.signal(_signal.SIGALRM, _on_alarm)
        _signal.setitimer(_signal.ITIMER_REAL, READ_DEADLINE)
        try:
            raw = sys.stdin.buffer.read()
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
        # Gemini CLI, Qwen Code, Copilot CLI: `hooks.py <event> <harness>` (hookadapt).
        harness = argv[1].strip().lower() if len(argv) > 1 else ""
        if harness not in NEXT_HARNESSES:
            harness = ""
        if event == "PostToolUse":
            out = take_pending(session_of(raw))
            if out and harness:
                from factbank_client.hook import adapt as hookadapt

                out = hookadapt.render_pending(harness, out)
            if out:
                sys.stdout.buffer.write(out)
                sys.stdout.flush()
        detach(event, raw, harness)
    except BaseException as exc:  # a hook never fails the session
        try:
            from factbank_client.hook import state as hookstate

            hookstate.log(f"{event}: {type(exc).__name__}: {exc}")
        except BaseException:
            pass
    return 0


def run() -> None:
    """The process: main(), then exit 0 without interpreter teardown (faster), whatever
    escaped it."""
    try:
        main()
        sys.stdout.flush()
    except BaseException:
        pass
    finally:
        os._exit(0)
