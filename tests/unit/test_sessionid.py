"""How a CLI or MCP process finds the harness session it runs in (factbank_client.sessionid):
the hook marks the harness (its nearest non-shell ancestor); a child of that harness finds the
mark; a recycled pid (another start time) does not inherit it; the environment overrides."""

from __future__ import annotations

import os
import subprocess
import sys

from factbank_client import sessionid

CHILD = "from factbank_client import sessionid; print(sessionid.current())"


def run(code: str, env: dict) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True).stdout.strip()


def test_a_child_of_the_marked_harness_finds_its_session(tmp_path, monkeypatch) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in (sessionid.ENV, "CLAUDE_CODE_SESSION_ID")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(sessionid.ENV, raising=False)
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID", raising=False)
    assert run(CHILD, env) == ""  # nothing marked yet
    # A "hook" child marks this process (its parent, not a shell), as a harness's hook does;
    # through `sh -c` the shell is skipped and this process is marked all the same.
    run("from factbank_client import sessionid; sessionid.mark('sess-1')", env)
    assert run(CHILD, env) == "sess-1"
    subprocess.run(["sh", "-c", f"{sys.executable} -c \"from factbank_client import "
                    "sessionid; sessionid.mark('sess-2')\""], env=env, check=True)
    assert run(CHILD, env) == "sess-2"
    assert subprocess.run(["sh", "-c", f"{sys.executable} -c '{CHILD}'"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip() == "sess-2"
    # A marker whose start time is not this process's (a recycled pid) is ignored.
    marker = tmp_path / "factbank" / "harness-pids" / str(os.getpid())
    marker.write_text("1 sess-old")
    assert run(CHILD, env) == ""
    assert run(CHILD, {**env, sessionid.ENV: "explicit"}) == "explicit"


def test_the_client_sends_the_session_header(monkeypatch) -> None:
    from factbank_client.client import Client
    from factbank_client.config import ClientConfig

    monkeypatch.setenv(sessionid.ENV, "abc")
    cfg = ClientConfig(url="http://127.0.0.1:1", recall_url="http://127.0.0.1:2",
                       tokens={"personal": "fb_x"})
    with Client(cfg) as client:
        assert client._headers("personal")[sessionid.HEADER] == "abc"
    monkeypatch.delenv(sessionid.ENV)
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID", raising=False)
    with Client(cfg) as client:
        assert sessionid.HEADER not in client._headers("personal")
