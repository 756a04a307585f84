"""The detached process that runs one harness and writes its run: `python -m
factbank_client.dispatch.supervisor STORE_DIR RUN_ID` with the spec (argv, cwd, env) as JSON
on stdin, so the harness's environment (API keys) is never written to disk.

`start()` launches it in its own session (`start_new_session`), so it outlives the dashboard
or terminal that started it and no terminal hang-up reaches it; the harness runs in a session
of its own too, so one signal to its process group stops it with its hooks and MCP servers.
The supervisor:

1. writes its pid into the record, starts the harness (stdin /dev/null, stdout and stderr
   piped), writes the harness's pid;
2. parses stdout line by line (parsers.py) into events appended to events.jsonl as they come
   (a live log for anyone tailing it), stderr lines as `stderr` events (the first
   MAX_STDERR_LINES; the rest are counted), within the store's bounds;
3. records the run on the project's timeline (timeline.py) in a thread, so a slow service
   never delays the harness;
4. on SIGTERM (`RunStore.cancel`), SIGINT or SIGHUP stops the harness's group (TERM, then KILL
   after KILL_AFTER seconds) and ends the run `cancelled`;
5. writes the end: status `done` (exit 0) or `failed`, exit code, the last message, the files
   edited, the command counts.

A supervisor that dies without step 5 (killed, out of memory, the machine rebooted) leaves a
`running` record whose pid is gone: the next reader marks it `lost` (store.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from factbank_client.dispatch import store as store_mod
from factbank_client.dispatch.parsers import Parser, parser_for
from factbank_client.dispatch.store import RunStore

MAX_STDERR_LINES = 200
MAX_LINE_BYTES = 4 * 1024 * 1024  # a longer stdout line (Pi's agent_end of a long session)
KILL_AFTER = 5.0


class Log:
    """The run's events.jsonl, written by this process only, within the store's bounds. It
    keeps the last seq itself: counting the log's lines on every append made a 5,000-command
    run take 36.8 s to supervise instead of 5.6 s (evals/bench_dispatch.py)."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.lock = threading.Lock()
        self.seq = 0
        self.bytes = 0
        self.dropped = 0

    def add(self, drafts: list[dict[str, Any]], *, final: bool = False) -> None:
        if not drafts:
            return
        with self.lock:
            keep = []
            for d in drafts:
                size = len(d.get("text") or "") + len(d.get("command") or "") + 200
                if not final and (self.seq + len(keep) >= store_mod.MAX_EVENTS - 2
                                  or self.bytes + size > store_mod.MAX_LOG_BYTES):
                    if self.dropped == 0:
                        keep.append({"kind": "error", "text": "the log reached its bound "
                                     f"({store_mod.MAX_EVENTS} events or "
                                     f"{store_mod.MAX_LOG_BYTES // 2**20} MiB): later events "
                                     "are not kept"})
                    self.dropped += 1
                    continue
                self.bytes += size
                keep.append(d)
            if keep:
                self.seq = self.store.append_events(self.run_id, keep, after=self.seq)


class Supervisor:
    def __init__(self, store: RunStore, run_id: str, spec: dict[str, Any]) -> None:
        self.store = store
        self.run_id = run_id
        self.spec = spec
        self.log = Log(store, run_id)
        run = store._read(run_id)
        if run is None:
            raise SystemExit(f"no run {run_id} in {store.path}")
        self.run = run
        self.parser: Parser = parser_for(run.agent, run.repo)
        self.proc: subprocess.Popen[bytes] | None = None
        self.cancelled = False
        self.timed_out = False
        self.session_known = threading.Event()
        self.finished = threading.Event()

    # --- signals ---------------------------------------------------------------------
    def on_signal(self, signum: int, frame: Any) -> None:
        del frame
        self.cancelled = True
        if self.proc is not None and self.proc.poll() is None:
            store_mod.kill_group(self.proc.pid, signal.SIGTERM)
            threading.Timer(KILL_AFTER, store_mod.kill_group,
                            args=(self.proc.pid, signal.SIGKILL)).start()

    def on_timeout(self) -> None:
        """The run's `timeout` passed: stop the harness like a cancel, but it failed."""
        if self.proc is not None and self.proc.poll() is None:
            self.timed_out = True
            store_mod.kill_group(self.proc.pid, signal.SIGTERM)
            threading.Timer(KILL_AFTER, store_mod.kill_group,
                            args=(self.proc.pid, signal.SIGKILL)).start()

    # --- the run -----------------------------------------------------------------------
    def main(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        self.store.update(self.run_id, supervisor_pid=os.getpid())
        env = self.spec.get("env")
        env = {**(env if env is not None else os.environ), "FACTBANK_DISPATCH_RUN": self.run_id}
        argv = [str(a) for a in self.spec["argv"]]
        try:
            self.proc = subprocess.Popen(argv, cwd=self.run.repo, env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            text = f"cannot start {argv[0]}: {exc.strerror or exc}"
            self.log.add([{"kind": "error", "text": text}], final=True)
            self.end("failed", 127, error=text)
            return 1
        self.store.update(self.run_id, pid=self.proc.pid)
        self.log.add([{"kind": "status", "text": f"started {self.run.agent} (pid "
                       f"{self.proc.pid}) in {self.run.repo}: {self.run.task}"}])
        if self.cancelled:  # a signal that came before the harness existed
            self.on_signal(signal.SIGTERM, None)
        timeout = self.spec.get("timeout")
        if timeout:
            timer = threading.Timer(float(timeout), self.on_timeout)
            timer.daemon = True
            timer.start()
        timeline = threading.Thread(target=self.record_timeline, daemon=True)
        timeline.start()
        hooks = threading.Thread(target=self.check_hooks, args=(env, argv), daemon=True)
        hooks.start()
        err = threading.Thread(target=self.read_stderr, daemon=True)
        err.start()
        self.read_stdout()
        code = self.proc.wait()
        err.join(timeout=5)
        hooks.join(timeout=25)  # its line belongs before the end
        status, _ = self.status_code()
        self.finished.set()
        self.session_known.set()
        text = f"{status}: {self.run.agent} exited with code {code}"
        if code < 0:
            text = f"{status}: {self.run.agent} was stopped by signal {-code}"
        error = self.parser.harness_error or ""
        if self.timed_out:
            error = f"timed out after {float(self.spec['timeout']):g} s"
            text = f"{status}: {error}; {self.run.agent} was stopped (exit code {code})"
        self.log.add([{"kind": "status", "text": text, "exit_code": code}], final=True)
        # The record says finished only once its last event is written (a reader that sees
        # `finished` has the whole log), and before the timeline's end is sent (a slow
        # service must not keep a finished run "running").
        self.end(status, code, error=error)
        timeline.join(timeout=30)
        return 0

    def read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            raw = out.readline(MAX_LINE_BYTES)
            if not raw:
                break
            if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES:
                while True:  # skip the rest of an oversized line
                    more = out.readline(MAX_LINE_BYTES)
                    if not more or more.endswith(b"\n"):
                        break
                self.log.add([{"kind": "error", "text": "skipped a stdout line longer than "
                               f"{MAX_LINE_BYTES // 2**20} MiB"}])
                continue
            line = raw.decode("utf-8", "replace")
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            try:
                drafts = (self.parser.feed(obj) if isinstance(obj, dict)
                          else self.parser.text_line(line))
            except Exception as exc:  # one odd line must not end the log
                drafts = [{"kind": "error", "text": f"could not read a line of the stream: "
                           f"{type(exc).__name__}: {exc}"}]
            self.log.add(drafts)
            if self.parser.session_id and not self.session_known.is_set():
                self.store.update(self.run_id, session_id=self.parser.session_id)
                self.session_known.set()

    def read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        n = 0
        for raw in self.proc.stderr:
            n += 1
            if n <= MAX_STDERR_LINES:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.log.add([{"kind": "stderr", "text": line}])
        if n > MAX_STDERR_LINES:
            self.log.add([{"kind": "stderr", "text": f"({n - MAX_STDERR_LINES} more stderr "
                           "lines not kept)"}])

    def record_timeline(self) -> None:
        from factbank_client.dispatch import timeline

        self.session_known.wait(timeout=timeline.SESSION_WAIT)
        note = timeline.record_start(self.run, self.parser.session_id)
        self.store.update(self.run_id, timeline=note)
        self.finished.wait()
        run = self.store._read(self.run_id) or self.run
        note = timeline.record_end(run, self.parser.session_id, self.status_code())
        self.store.update(self.run_id, timeline=note)

    def check_hooks(self, env: dict[str, str], argv: list[str]) -> None:
        from factbank_client.dispatch.hooks_check import check

        try:
            state, text = check(self.run.agent, env, self.run.repo, argv)
        except Exception as exc:  # a check that fails says so; the run goes on
            state, text = "unknown", f"could not check factbank's hooks: {exc}"
        self.store.update(self.run_id, hooks=state)
        self.log.add([{"kind": "status" if state == "active" else "error", "text": text}])

    def status_code(self) -> tuple[str, int | None]:
        code = self.proc.returncode if self.proc is not None else None
        if self.cancelled and not self.timed_out:
            return "cancelled", code
        status = "done" if code == 0 and not self.timed_out else "failed"
        if status == "done" and self.parser.harness_error:
            status = "failed"  # exit 0 but the harness said it failed (Claude's is_error)
        return status, code

    def end(self, status: str, code: int | None, *, error: str = "") -> None:
        p = self.parser
        self.store.update(self.run_id, status=status, exit_code=code,
                          ended_at=store_mod.now_iso(), summary=store_mod.cut(p.summary, 2000),
                          files=p.files, commands=p.commands,
                          failed_commands=p.failed_commands, events=self.log.seq,
                          session_id=p.session_id, error=store_mod.cut(error, 1000))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m factbank_client.dispatch.supervisor STORE_DIR RUN_ID",
              file=sys.stderr)
        return 2
    spec = json.loads(sys.stdin.read() or "{}")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return Supervisor(RunStore(args[0]), args[1], spec).main()


if __name__ == "__main__":
    sys.exit(main())
