"""Headless dispatch: run Claude Code, Codex or Pi on a task in a repository,
with factbank's hooks active, and keep a live, durable log of what it does.

    from factbank_client.dispatch import RunStore, start
    store = RunStore()
    run = start(store, agent="codex", task="make the tests pass", repo=Path("."))
    store.events(run.id, after=0)    # poll: messages, commands with exit codes, edits
    store.cancel(run.id)

`start` returns at once: a detached supervisor process (supervisor.py) runs the harness with
its JSON event stream and writes the run's record and log as JSON files (store.py), so runs
survive the dashboard or terminal that started them. The harness runs with its normal config
(the user's HOME, so the hooks `factbank install` wrote load the shared context at session
start), and the run is recorded on the project's timeline (timeline.py). `make_handoff` turns
a finished run into a handoff for the next agent.

Client code only: nothing here imports the server packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from factbank_client.dispatch.harness import AGENTS, LABELS, argv, find_binary
from factbank_client.dispatch.store import (
    Event,
    Run,
    RunStore,
    new_id,
    now_iso,
)
from factbank_client.errors import DispatchError
from factbank_client.redact import redact
from factbank_common.inert import inert

__all__ = ["AGENTS", "LABELS", "DispatchError", "Event", "Run", "RunStore", "make_handoff",
           "start"]

HANDOFF_CHARS = 2000  # the server's limit on a handoff's text


def start(store: RunStore, agent: str, task: str, repo: Path | str, *,
          permissions: str = "default", extra_args: Sequence[str] = (),
          env: Mapping[str, str] | None = None,
          binaries: Mapping[str, str] | None = None,
          timeout: float | None = None) -> Run:
    """Start `agent` on `task` in `repo` and return its Run at once (status `running`).

    `permissions`: "default" (edits allowed: Claude's acceptEdits, Codex's workspace-write
    sandbox) or "full" (Claude bypassPermissions, Codex danger-full-access); see harness.py.
    `env`: the harness's whole environment (default: this process's). `extra_args` go to the
    harness's command line before the task. `timeout` (seconds): the harness is stopped after
    it and the run fails ("timed out"). Raises DispatchError naming the bad argument."""
    task = task.strip()
    if timeout is not None and not timeout > 0:
        raise DispatchError(f"timeout: {timeout!r} is not a positive number of seconds")
    repo_path = Path(repo).expanduser()
    if not repo_path.is_dir():
        raise DispatchError(f"repo: {repo} is not a directory")
    repo_path = repo_path.resolve()
    binary = find_binary(agent, binaries, path=env.get("PATH") if env is not None else None)
    command = argv(agent, task, binary, permissions=permissions, extra_args=extra_args)
    from factbank_client.project import project_key

    try:
        project = project_key(repo_path)
    except OSError:
        project = None
    run = Run(id=new_id(), agent=agent, task=task, repo=str(repo_path),  # redacted by create
              started_at=now_iso(), project=project)
    store.create(run)
    spec = {"argv": command, "env": dict(env) if env is not None else None,
            "timeout": timeout}
    store.prune()
    log = os.open(store.run_dir(run.id) / "supervisor.log", os.O_WRONLY | os.O_CREAT
                  | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "factbank_client.dispatch.supervisor", str(store.path),
             run.id],
            stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True,
            close_fds=True, cwd=str(store.path))  # not the repo: `-m` puts cwd on sys.path
    except OSError as exc:  # the record says why instead of turning lost 30 s later
        text = f"cannot start the supervisor ({sys.executable}): {exc.strerror or exc}"
        store.append_events(run.id, [{"kind": "error", "text": text}])
        return store.update(run.id, status="failed", ended_at=now_iso(), error=text,
                            events=1) or run
    finally:
        os.close(log)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec).encode())
    proc.stdin.close()
    # Reap it when it ends, so a long-lived caller (the dashboard) collects no zombies; if
    # the caller exits first, init adopts it.
    threading.Thread(target=proc.wait, name=f"dispatch-reap-{run.id}", daemon=True).start()
    return store.update(run.id, supervisor_pid=proc.pid) or run


def handoff_text(run: Run) -> str:
    """What the next agent is told about a finished run, within the server's 2,000 chars."""
    label = LABELS.get(run.agent, run.agent)
    outcome = run.status if run.exit_code is None else f"{run.status}, exit {run.exit_code}"
    head = f"{label} ran headless (dispatch {run.id}, {outcome}) on: {inert(run.task, 600)}"
    parts = [head]  # one inert line each: the harness's text cannot add lines of its own
    if run.files:
        listed = ", ".join(inert(f, 300) for f in run.files[:20]) + (
            " …" if len(run.files) > 20 else "")
        parts.append(f"Edited: {listed}.")
    if run.commands:
        parts.append(f"Ran {run.commands} command(s), {run.failed_commands} failed.")
    if run.error:
        parts.append(f"Error: {inert(run.error, 600)}")
    if run.summary:
        parts.append(f"Its last message: {inert(run.summary, HANDOFF_CHARS)}")
    parts.append(f"Full log: factbank dispatch show {run.id}")
    text = "\n".join(parts)
    if len(text) > HANDOFF_CHARS:
        tail = f"\nFull log: factbank dispatch show {run.id}"
        text = text[: HANDOFF_CHARS - len(tail) - 1] + "…" + tail
    return redact(text)


def make_handoff(run: Run, client: Any, *, to_agent: str | None = None,
                 store: RunStore | None = None) -> int:
    """Leave a handoff about a finished run for the next session in its project (the
    client's `handoff` call; `to_agent` limits it to one agent). Returns the handoff id and,
    with `store`, records it on the run (`handoff_id`)."""
    if not run.finished:
        raise DispatchError(f"run {run.id} is still {run.status}: hand off a finished run")
    if not run.project:
        raise DispatchError(f"run {run.id}: {run.repo} is not in a git repository, so there "
                            "is no project for a handoff to go to")
    if to_agent is not None and to_agent not in AGENTS:
        raise DispatchError(f"to_agent: unknown agent {to_agent!r}; one of {', '.join(AGENTS)}")
    # Not the run's session id: the server files a handoff's event under the session it
    # names, with the handing-off client's agent (`cli`), which relabelled Claude Code's
    # session "with cli" in the next session's briefing (seen in test_dispatch_e2e).
    out = client.handoff(handoff_text(run), project=run.project, to_agent=to_agent,
                         files=run.files[:50])
    handoff_id = int(out["id"])
    if store is not None:
        store.update(run.id, handoff_id=handoff_id)
    run.handoff_id = handoff_id
    return handoff_id

