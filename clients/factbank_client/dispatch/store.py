"""Runs on disk: one directory per run, written by its supervisor, read by anyone.

    <dir>/<id>/run.json      the record (Run), rewritten atomically under <dir>/<id>/lock
    <dir>/<id>/events.jsonl  the log (Event per line, seq 1..), appended by the supervisor only

`<dir>` is `platformdirs.user_state_dir("factbank")/runs` (0700; files 0600). Everything is
plain JSON so a dashboard restart, a second dashboard or `factbank dispatch list` in another
terminal all see the same runs. A record says `running` until its supervisor writes the end;
a reader that finds a `running` record whose supervisor process is gone (no such pid, a zombie,
or a pid now used by another program: /proc/<pid>/cmdline must name the run) marks it `lost`,
appends a `status` event saying so, and stops the harness the supervisor left behind, so a run
never silently disappears and never silently keeps running unwatched.

Order: a run's record turns finished only after its last event is in the log (the supervisor
writes the final `status` event, then the end; a reader marking a run lost appends its event
first, under the lock), so a reader that sees `finished` and then reads the log has all of it.

Bounds (each stated where it is enforced): a run's log keeps at most MAX_EVENTS events and
MAX_LOG_BYTES bytes (then one `error` event says how many were dropped; the final `status`
event is always written); each event's text is cut at MAX_TEXT characters; `list()` reads at
most `limit` (default 100) records; the store keeps the MAX_RUNS newest finished runs and
deletes older finished ones when a run starts.

Secrets: every string this store writes (a record's fields, an event's text,
command and path) passes `factbank_client.redact.redact` here, the one door to the run files,
so neither the files nor what reads them (`dispatch show`, the dashboard's dispatch page, a
handoff) can hold a secret the server would have redacted. Redacted before it is cut, so a
secret is never halved into something no rule recognises.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from factbank_client.redact import redact

RunStatus = Literal["running", "done", "failed", "lost", "cancelled"]
EventKind = Literal["message", "command", "edit", "tool", "status", "error", "stderr"]
FINISHED = ("done", "failed", "lost", "cancelled")

MAX_EVENTS = 10_000
MAX_LOG_BYTES = 16 * 1024 * 1024
MAX_TEXT = 4000
MAX_RUNS = 500
LIST_LIMIT = 100
# A record whose supervisor has not written its pid yet is "starting", not lost, for this long.
START_GRACE = 30.0


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _clean(value: Any) -> Any:
    """A record's or event's value with its strings redacted (lists item by item)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def cut(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Record:
    """A dataclass record as the store writes it (JSON) and reads it back; a key this version
    does not know (a newer writer's) is dropped, a missing one takes its default."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Event(_Record):
    """One line of a run's log. `seq` counts from 1; `kind` is one of EventKind:
    `message` (the agent's text), `command` (a shell command: `command`, `exit_code`, its
    output in `text`), `edit` (a file the agent changed: `path`), `tool` (any other tool
    call), `status` (start, session, end), `error`, `stderr` (the harness's stderr lines)."""

    seq: int
    at: str
    kind: str
    text: str
    command: str | None = None
    exit_code: int | None = None
    path: str | None = None


@dataclass
class Run(_Record):
    """A dispatched harness run. `id` sorts by start time; `pid` is the harness's (its
    process group: hooks and MCP servers die with it), `supervisor_pid` the process that
    writes the record; `session_id` is the harness's own session id once it said it."""

    id: str
    agent: str
    task: str
    repo: str
    status: str = "running"
    pid: int | None = None
    started_at: str = ""
    ended_at: str | None = None
    exit_code: int | None = None
    handoff_id: int | None = None
    session_id: str | None = None
    supervisor_pid: int | None = None
    project: str | None = None
    summary: str = ""  # the agent's last message
    files: list[str] = field(default_factory=list)  # edited, relative to the repo root
    commands: int = 0
    failed_commands: int = 0
    events: int = 0
    error: str = ""
    timeline: str = ""  # how recording on the timeline went
    hooks: str = ""  # factbank's hooks in this run: active, not installed, untrusted, unknown

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def default_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("factbank")) / "runs"


def new_id() -> str:
    """`20261201T235501123-3fa2c1`: UTC start time to the millisecond, then randomness, so
    ids sort by start and two starts in one millisecond do not collide."""
    now = datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%S}{now.microsecond // 1000:03d}-{secrets.token_hex(3)}"


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def process_alive(pid: int | None, marker: str | None = None) -> bool:
    """Whether `pid` is a live (non-zombie) process; with `marker`, also that its command
    line or environment names it (guards against a reused pid), where /proc can tell."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no /proc (macOS): the signal test is all there is
    try:
        stat = (proc / "stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
        if marker is None:
            return True
        cmdline = (proc / "cmdline").read_bytes()
        if not cmdline:
            # Right after exec the kernel shows an empty command line for a moment (seen: 3
            # in 40 fresh processes here): not yet known, so not someone else's pid.
            return True
        if marker.encode() in cmdline:
            return True
        with contextlib.suppress(OSError):
            return marker.encode() in (proc / "environ").read_bytes()
        return False
    except (OSError, IndexError):
        return False


def kill_group(pid: int | None, sig: int = signal.SIGTERM) -> bool:
    if not pid:
        return False
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class RunStore:
    """The runs under one directory (default: the user's state dir)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_dir()
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        # run id -> (seq, byte offset just after that event's line): where the last read of
        # a log stopped, so a live view's next poll reads only what is new (the log only
        # grows; its lines never change).
        self._ends: dict[str, tuple[int, int]] = {}

    # --- paths -------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.path / run_id

    def events_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "events.jsonl"

    # --- records -----------------------------------------------------------------------
    def create(self, run: Run) -> Run:
        for f in fields(run):  # the caller's object too: what it shows is what is stored
            if f.name not in ("id", "agent", "status", "started_at", "repo"):  # ours
                setattr(run, f.name, _clean(getattr(run, f.name)))
        d = self.run_dir(run.id)
        d.mkdir(mode=0o700)
        self.events_path(run.id).touch(mode=0o600)
        _write_private(d / "run.json", json.dumps(run.to_dict(), ensure_ascii=False))
        return run

    @contextlib.contextmanager
    def _locked(self, run_id: str) -> Iterator[None]:
        fd = os.open(self.run_dir(run_id) / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self, run_id: str) -> Run | None:
        try:
            data = json.loads((self.run_dir(run_id) / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return Run.from_dict(data) if isinstance(data, dict) else None

    def update(self, run_id: str, *, only_running: bool = False, **changes: Any) -> Run | None:
        """Change fields of a record (read, change, replace, under the run's lock). With
        `only_running`, a record that has already finished is left as it is (None)."""
        with self._locked(run_id):
            run = self._read(run_id)
            if run is None or (only_running and run.finished):
                return None
            for key, value in changes.items():
                if not hasattr(run, key):
                    raise AttributeError(f"Run has no field {key!r}")
                setattr(run, key, _clean(value))
            _write_private(self.run_dir(run_id) / "run.json",
                           json.dumps(run.to_dict(), ensure_ascii=False))
            return run

    def get(self, run_id: str) -> Run | None:
        try:
            run = self._read(run_id)
        except ValueError:
            return None
        return self._check(run) if run is not None else None

    def list(self, limit: int = LIST_LIMIT) -> list[Run]:
        """The newest `limit` runs, newest first; running ones re-checked (lost if their
        supervisor is gone)."""
        out: list[Run] = []
        for name in sorted((p.name for p in self.path.iterdir() if p.is_dir()
                            and not p.name.startswith(".")), reverse=True):
            run = self._read(name)
            if run is not None:
                out.append(self._check(run))
                if len(out) >= max(0, int(limit)):
                    break
        return out

    def _check(self, run: Run) -> Run:
        if run.finished:
            return run
        if run.supervisor_pid is None:
            started = _parse(run.started_at)
            if started is None or time.time() - started < START_GRACE:
                return run
        elif process_alive(run.supervisor_pid, run.id):
            return run
        return self._mark_lost(run)

    def _mark_lost(self, run: Run) -> Run:
        harness_alive = process_alive(run.pid, run.id)
        with self._locked(run.id):
            fresh = self._read(run.id)
            if fresh is None or fresh.finished:
                return fresh or run
            text = (f"lost: the supervisor (pid {run.supervisor_pid}) is gone without "
                    "writing the run's end")
            if harness_alive:
                kill_group(run.pid)
                text += f"; stopped the harness it left running (pid {run.pid})"
            seq = self.append_events(run.id, [{"kind": "status", "text": text}])
            fresh.status, fresh.ended_at, fresh.error = "lost", now_iso(), text
            fresh.events = seq
            _write_private(self.run_dir(run.id) / "run.json",
                           json.dumps(fresh.to_dict(), ensure_ascii=False))
            return fresh

    # --- the log -----------------------------------------------------------------------
    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """The events with seq > `after` (at most `limit`), oldest first."""
        out: list[Event] = []
        try:
            fh = self.events_path(run_id).open("rb")
        except (OSError, ValueError):
            return out
        n, offset = 0, 0
        known = self._ends.get(run_id)
        if known is not None and known[0] <= after:
            n, offset = known
            fh.seek(offset)
        with fh:
            for raw in fh:
                if not raw.endswith(b"\n"):  # a line still being written
                    break
                n += 1
                offset += len(raw)
                if n <= after:
                    continue
                try:
                    out.append(Event.from_dict(json.loads(raw)))
                except (ValueError, TypeError):
                    continue
                if limit is not None and len(out) >= limit:
                    break
        if len(self._ends) > 1000:
            self._ends.clear()
        self._ends[run_id] = (n, offset)
        return out

    def append_events(self, run_id: str, drafts: list[dict[str, Any]],
                      after: int | None = None) -> int:
        """Append events (kind, text, command?, exit_code?, path?) with the next seqs; for a
        writer that knows it is the only one (the supervisor, or a reader marking the run
        lost). `after`: the last seq written, if the writer keeps count (else the lines are
        counted: the supervisor passes it, or every event would re-read the whole log).
        Returns the last seq."""
        path = self.events_path(run_id)
        if after is not None:
            seq = after
        else:
            seq = sum(1 for _ in path.open("rb")) if path.exists() else 0
        lines = []
        for d in drafts:
            seq += 1
            lines.append(json.dumps(Event(seq=seq, at=d.get("at") or now_iso(),
                                          kind=d["kind"],
                                          text=cut(redact(str(d.get("text") or ""))),
                                          command=_clean(d.get("command")),
                                          exit_code=d.get("exit_code"),
                                          path=_clean(d.get("path"))).to_dict(),
                                    ensure_ascii=False) + "\n")
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(lines))
        return seq

    # --- control -----------------------------------------------------------------------
    def cancel(self, run_id: str, wait: float = 5.0) -> bool:
        """Stop a running run: its supervisor is told (SIGTERM), stops the harness's whole
        process group and writes `cancelled`. If the supervisor is gone, the harness is
        stopped here and the run marked cancelled. False if the run is not running."""
        run = self.get(run_id)
        if run is None or run.finished:
            return False
        if process_alive(run.supervisor_pid, run.id):
            os.kill(int(run.supervisor_pid or 0), signal.SIGTERM)
            end = time.monotonic() + wait
            while time.monotonic() < end:
                fresh = self._read(run_id)
                if fresh is None or fresh.finished:
                    return True
                time.sleep(0.05)
            return True
        if process_alive(run.pid, run.id):
            kill_group(run.pid)
        with self._locked(run_id):
            fresh = self._read(run_id)
            if fresh is None or fresh.finished:
                return fresh is not None
            fresh.events = self.append_events(run_id, [
                {"kind": "status", "text": "cancelled (the supervisor was already gone)"}])
            fresh.status, fresh.ended_at = "cancelled", now_iso()
            _write_private(self.run_dir(run_id) / "run.json",
                           json.dumps(fresh.to_dict(), ensure_ascii=False))
        return True

    def prune(self, keep: int = MAX_RUNS) -> int:
        """Delete the finished runs beyond the `keep` newest runs; returns how many."""
        names = sorted((p.name for p in self.path.iterdir() if p.is_dir()
                        and not p.name.startswith(".")), reverse=True)
        removed = 0
        for name in names[keep:]:
            run = self._read(name)
            if run is not None and run.finished:
                shutil.rmtree(self.path / name, ignore_errors=True)
                removed += 1
        return removed


def _parse(at: str | None) -> float | None:
    if not at:
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None
