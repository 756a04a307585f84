"""Child processes that the tests stop by signal start with the stop signals a terminal's shell
leaves them: the default action.

A test run started in the background by a script inherits ignored signals (`cmd &` without job
control ignores SIGINT and SIGQUIT, `nohup` ignores SIGHUP), and every child inherits them
through exec. `factbank up` rightly keeps a signal it was started with ignored (`nohup
factbank up &` is meant to outlive its terminal), so without this the signal tests would test
how pytest was launched: a CI run started with `nohup ... &` failed eight of them so.
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)


def default_signals() -> None:
    """For `subprocess.Popen(preexec_fn=...)`: each stop signal back to its default action."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
