"""The Pi extension records the timeline: its events are the ones
`factbank import-history pi` reads from Pi's session file (same kinds, paths, exit codes and
keys, so the server stores each once), a send never blocks a tool, what the service did not
take is kept and left in the hooks' buffer at the end, and a conflict is shown once."""

from __future__ import annotations

import json
from pathlib import Path

from factbank.runtime.runner import free_port
from factbank_client.history import Session, pi
from tests.unit.hook_standins import Service
from tests.unit.pi_ts import run_ts

CALLS = [
    {"toolCallId": "call_1", "toolName": "edit", "input": {"path": "src/app.py"},
     "content": [{"type": "text", "text": "Successfully replaced 1 block(s)"}], "isError": False},
    {"toolCallId": "call_2", "toolName": "write", "input": {"path": "src/x.py"},
     "content": [{"type": "text", "text": "EACCES"}], "isError": True},
    {"toolCallId": "call_3", "toolName": "bash", "input": {"command": "make test"},
     "content": [{"type": "text", "text": "1 failed\n\n\nCommand exited with code 2"}],
     "isError": True},
    {"toolCallId": "call_4", "toolName": "bash", "input": {"command": "ls"},
     "content": [{"type": "text", "text": "src"}], "isError": False},
    {"toolCallId": "call_5", "toolName": "bash", "input": {"command": "sleep 99"},
     "content": [{"type": "text", "text": "Command aborted"}], "isError": True},
    {"toolCallId": "call_6", "toolName": "read", "input": {"path": "src/app.py"},
     "content": [], "isError": False},
]


def repo(tmp_path: Path) -> Path:
    r = tmp_path / "api"
    (r / ".git").mkdir(parents=True)
    (r / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/api\n')
    (r / ".git" / "HEAD").write_text("ref: refs/heads/feature/pi\n")
    (r / "src").mkdir()
    return r


def test_tool_events_match_the_session_file_reader(tmp_path):
    r = repo(tmp_path)
    got = run_ts(f"""
        const base = {{session_id: "pi-1", project: m.projectKey({json.dumps(str(r))}),
                       agent: "pi"}};
        result = {{events: {json.dumps(CALLS)}.flatMap((c) =>
                     m.toolEvents(base, {json.dumps(str(r))}, {json.dumps(str(r))}, c)),
                  branch: m.gitBranch({json.dumps(str(r))}),
                  rel: m.relativeToRoot("../docs/a.md", {json.dumps(str(r))},
                                        {json.dumps(str(r / "src"))}),
                  outside: m.relativeToRoot("/etc/hosts", {json.dumps(str(r))}, "/"),
                  root: m.relativeToRoot({json.dumps(str(r))}, {json.dumps(str(r))},
                                         {json.dumps(str(r))})}};
    """)
    session = Session("pi-1", "pi", str(r))
    want = [e for c in CALLS for e in pi.tool_events(
        session, c["toolCallId"], c["toolName"], c["input"], None, c["isError"],
        "\n".join(x["text"] for x in c["content"]))]
    strip = ("at", "tool")
    assert [{k: v for k, v in e.items() if k not in strip} for e in got["events"]] == [
        {k: v for k, v in e.items() if k not in strip} for e in want]
    assert [e["key"] for e in got["events"]] == ["call_1:0", "call_3:0", "call_4:0"]
    assert got["events"][0]["path"] == "src/app.py" and got["events"][1]["exit_code"] == 2
    assert got["events"][0]["project"] == "github.com/acme/api"
    assert (got["branch"], got["rel"], got["outside"], got["root"]) == (
        "feature/pi", "docs/a.md", "/etc/hosts", ".")  # the session start's cwd: "."-> ""


def cfg_js(port: int) -> str:
    return (f'{{url: "http://127.0.0.1:{port}", recallUrl: "http://127.0.0.1:{port}", '
            f'tokens: {{personal: "tok"}}, teamCategories: []}}')


def test_unsent_events_are_kept_and_left_in_pis_buffer(tmp_path):
    cache = tmp_path / "cache"
    got = run_ts(f"""
        process.env.XDG_CACHE_HOME = {json.dumps(str(cache))};
        const t = new m.Timeline();
        const cfg = {cfg_js(free_port())};
        let done = false;
        const p = t.send(cfg, [{{session_id: "pi-1", kind: "file", path: "a.py", key: "c1:0"}}],
                         "pi-1");
        p.then(() => {{ done = true; }});
        const pending = !done;  // send() hands back a promise at once (the tool goes on)
        await p;
        await t.send(cfg, [{{session_id: "pi-1", kind: "file", path: "b.py", key: "c2:0"}}],
                     "pi-1");
        const kept = t.unsent.length;
        await t.close();
        result = {{pending, kept, left: t.unsent.length}};
    """)
    assert got["pending"] is True and got["kept"] == 2 and got["left"] == 0
    buffer = cache / "factbank" / "timeline-buffer-pi.jsonl"
    lines = [json.loads(x) for x in buffer.read_text().splitlines()]
    assert [e["path"] for e in lines] == ["a.py", "b.py"]
    assert buffer.stat().st_mode & 0o777 == 0o600


def test_the_next_pi_session_sends_what_the_last_one_left(tmp_path):
    """On a machine where only Pi runs no hook reads a buffer, so Pi sends its own: the next
    session adopts it and sends it with its first events, torn lines dropped."""
    cache = tmp_path / "cache"
    buffer = cache / "factbank" / "timeline-buffer-pi.jsonl"
    buffer.parent.mkdir(parents=True)
    old = [{"session_id": "pi-0", "kind": "file", "path": p, "key": f"c{i}:0"}
           for i, p in enumerate(["a.py", "b.py"])]
    buffer.write_text("".join(json.dumps(e) + "\n" for e in old) + '{"torn\n')
    service = Service()
    try:
        got = run_ts(f"""
            process.env.XDG_CACHE_HOME = {json.dumps(str(cache))};
            const t = new m.Timeline();
            t.adopt();
            t.adopt();  // nothing left to take the second time
            await t.send({cfg_js(service.port)},
                         [{{session_id: "pi-1", kind: "session_start", key: "start"}}], "pi-1");
            result = t.unsent.length;
        """)
    finally:
        service.close()
    assert got == 0
    assert [e["key"] for e in service.requests[0]["body"]["events"]] == ["c0:0", "c1:0", "start"]
    assert not buffer.exists()


def test_a_conflict_is_told_once():
    service = Service()
    warning = "src/app.py was also touched by bob with codex on desk 2 min ago (branch main)"
    service.conflicts = [{"session_id": "pi-1", "path": "src/app.py", "warning": warning},
                         {"session_id": "other", "path": "src/app.py", "warning": "not mine"}]
    try:
        got = run_ts(f"""
            const t = new m.Timeline();
            await t.send({cfg_js(service.port)},
                         [{{session_id: "pi-1", kind: "file", path: "src/app.py"}}], "pi-1");
            result = [t.takeWarnings(), t.takeWarnings(), t.unsent.length];
        """)
    finally:
        service.close()
    assert got == [f"[factbank] Possible edit conflict (timeline, not facts):\n- {warning}", "",
                   0]
    assert service.requests[0]["token"] == "tok"
