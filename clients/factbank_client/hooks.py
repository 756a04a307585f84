# factbank's Claude Code and Codex hooks: `python -I -S .../factbank_client/hooks.py <event>`.
# Tiny on purpose: a script is compiled on every run, a module loads from bytecode
# (factbank_client/hook/entry.py says why, and does the work).
import os
import sys

if __name__ == "__main__":
    if not __package__:  # run as a script: `-I -S` leaves the package off sys.path
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from factbank_client.hook.entry import run

    run()
