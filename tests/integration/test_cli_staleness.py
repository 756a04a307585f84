"""Staleness, the client's half, against the real services and real git: fingerprints at
write time, `verify` (fresh, moved, stale, deleted, renamed, unreachable commit), `rules
candidates` / `rules propose` (which never touches a rule file), `migrate-native`.

Both services run in a thread on the test's database (as in test_cli.py); the CLI runs
in-process inside a real git repository made with the `git` binary."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.conftest import git
from tests.integration.cli_env import ok, ok_json, run  # one way to run the CLI in process
from tests.integration.cli_repo import API_YAML, add_file_fact, make_repo
from tests.integration.cli_repo import env as env  # the fixture


def test_a_file_fact_carries_its_fingerprint_and_a_commit_fact_its_commit(env, capsys):
    fact = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    fp = fact["fingerprint"]
    head = git(env.repo, "rev-parse", "HEAD")
    assert fp == {"quote_sha256": hashlib.sha256(b"  port: 8080").hexdigest(),
                  "path": "deploy/api.yaml", "line": 4, "lines": 1,
                  "file_blob": git(env.repo, "hash-object", "deploy/api.yaml"),
                  "commit": head, "dirty": False}
    # an uncommitted edit: the same commit, marked dirty, the blob of the file as it is now
    (env.repo / "deploy" / "api.yaml").write_text(API_YAML + "  tls: true\n", "utf-8")
    fact = add_file_fact(capsys, "The API serves TLS", "deploy/api.yaml:6", "tls: true")
    assert fact["fingerprint"]["dirty"] is True
    assert fact["fingerprint"]["file_blob"] == git(env.repo, "hash-object", "deploy/api.yaml")

    short = head[:8]
    fact = ok_json(capsys, "add", "The repository starts at its init commit", "--category",
                   "project", "--source-kind", "commit", "--source", short, "--quote", "init",
                   "--tag", "git")["fact"]
    assert fact["fingerprint"]["commit"] == head
    assert fact["fingerprint"]["quote_sha256"] == hashlib.sha256(b"init").hexdigest()


def test_verify_fresh_moved_stale_deleted_renamed_and_unreachable(env, capsys):
    port = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    workers = add_file_fact(capsys, "The API runs four workers", "deploy/api.yaml:5",
                            "workers: 4")
    host = add_file_fact(capsys, "The API binds every interface", "deploy/api.yaml:3",
                         "host: 0.0.0.0")
    (env.repo / "docs").mkdir()
    (env.repo / "docs" / "pool.md").write_text("Pool\n\nThe pool keeps 16 connections.\n",
                                               "utf-8")
    (env.repo / "docs" / "gone.md").write_text("The cache lives for one hour.\n", "utf-8")
    git(env.repo, "add", "-A")
    git(env.repo, "commit", "-q", "-m", "docs")
    pool = add_file_fact(capsys, "The pool keeps 16 connections", "docs/pool.md:3",
                         "The pool keeps 16 connections.")
    gone = add_file_fact(capsys, "The cache lives for one hour", "docs/gone.md:1",
                         "The cache lives for one hour.")
    git(env.repo, "checkout", "-q", "-b", "side")
    (env.repo / "side.txt").write_text("a side branch\n", "utf-8")
    git(env.repo, "add", "-A")
    git(env.repo, "commit", "-q", "-m", "side work")
    side = git(env.repo, "rev-parse", "HEAD")
    commit_fact = ok_json(capsys, "add", "The side branch added side.txt", "--category",
                          "project", "--source-kind", "commit", "--source", side, "--quote",
                          "side work", "--tag", "git")["fact"]
    git(env.repo, "checkout", "-q", "main")

    # Nothing changed yet: every fact is fresh.
    report = ok_json(capsys, "verify")
    assert {v["verdict"] for v in report["verdicts"]} == {"fresh"}
    assert report["banks"]["personal"]["fresh"] == 6

    # The history: the port line changes, two lines go in above the workers (it moves),
    # pool.md is renamed, gone.md deleted, the side branch deleted (its commit unreachable).
    (env.repo / "deploy" / "api.yaml").write_text(
        "service: api\n# the API\n# staging\nserver:\n  host: 0.0.0.0\n  port: 9443\n"
        "  workers: 4\n", "utf-8")
    git(env.repo, "mv", "docs/pool.md", "docs/database.md")
    git(env.repo, "rm", "-q", "docs/gone.md")
    git(env.repo, "commit", "-q", "-am", "edit, move, rename, delete")
    git(env.repo, "branch", "-q", "-D", "side")

    report = ok_json(capsys, "verify")
    by_id = {v["id"]: v for v in report["verdicts"]}
    assert by_id[port["id"]]["verdict"] == "stale"
    assert by_id[port["id"]]["reason"] == \
        "the quote changed at deploy/api.yaml:4: now 'server:'"
    assert by_id[workers["id"]]["verdict"] == "moved"
    assert by_id[workers["id"]]["location"] == "deploy/api.yaml:7"
    assert by_id[host["id"]]["location"] == "deploy/api.yaml:5"
    assert by_id[pool["id"]]["verdict"] == "moved"
    assert by_id[pool["id"]]["location"] == "docs/database.md:3"
    assert by_id[gone["id"]]["reason"] == "docs/gone.md was deleted"
    assert by_id[commit_fact["id"]]["verdict"] == "stale"
    assert "no longer reachable" in by_id[commit_fact["id"]]["reason"]
    answer = report["banks"]["personal"]
    assert (answer["fresh"], answer["moved"], answer["stale"]) == (0, 3, 3)

    # What the server made of it: stale with reason and context, moved with its history.
    got = ok_json(capsys, "get", str(port["id"]))
    assert got["status"] == "stale"
    assert got["stale"]["context"].splitlines()[2] == "4: server:"
    hist = ok_json(capsys, "history", str(workers["id"]))
    assert hist["fact"]["source"]["location"] == "deploy/api.yaml:7"
    relocated = [e for e in hist["events"] if e["kind"] == "relocated"]
    assert relocated and "deploy/api.yaml:5 -> deploy/api.yaml:7" in relocated[0]["reason"]
    assert ok_json(capsys, "get", str(pool["id"]))["source"]["location"] == \
        "docs/database.md:3"

    # Stale facts are never injected, still found and marked.
    preview = ok_json(capsys, "inject-preview", "--prompt", "which port does the API use?")
    assert port["id"] not in preview["facts"]
    hits = ok_json(capsys, "search", "which port does the API listen on")["results"]
    assert any(h["fact"]["id"] == port["id"] and h["fact"]["status"] == "stale" for h in hits)

    # The moved facts are fresh at their new place: a second verify changes nothing, and
    # with --all the stale ones stay stale (their reason unchanged).
    report = ok_json(capsys, "verify", "--all")
    answer = report["banks"]["personal"]
    assert (answer["fresh"], answer["moved"], answer["stale"], answer["still_stale"]) == \
        (3, 0, 0, 3)
    text = ok(capsys, "verify")
    assert text.strip().endswith("3 fresh, 0 moved, 0 turned stale, 0 still stale")


def test_only_a_commit_tells_the_bank(env, capsys):
    """An uncommitted edit, or a file never committed, is one member's experiment: `factbank
    verify` (what the session-start and post-commit hooks run) judges what HEAD holds and
    leaves the fact fresh for the team; `--working-tree` is the explicit local look; the
    commit is the evidence."""
    port = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    (env.repo / "deploy" / "api.yaml").write_text(API_YAML.replace("8080", "9090"), "utf-8")
    (env.repo / "local.md").write_text("scratch: the queue is redis\n", "utf-8")
    scratch = add_file_fact(capsys, "The scratch queue is redis", "local.md:1",
                            "the queue is redis")
    (env.repo / "local.md").write_text("scratch: the queue is rabbit\n", "utf-8")
    report = ok_json(capsys, "verify")
    by_id = {v["id"]: v["verdict"] for v in report["verdicts"]}
    assert by_id.get(port["id"]) == "fresh", report
    skipped = {s["id"]: s["reason"] for s in report["skipped"]}
    assert "not committed" in skipped.get(scratch["id"], ""), report
    hits = ok_json(capsys, "search", "which port does the API listen on")["results"]
    assert any(h["fact"]["id"] == port["id"] and h["fact"]["status"] == "active" for h in hits)

    git(env.repo, "commit", "-q", "-m", "port 9090", "--", "deploy/api.yaml")
    report = ok_json(capsys, "verify")
    assert {v["id"]: v["verdict"] for v in report["verdicts"]}[port["id"]] == "stale"
    assert "9090" in next(v["context"] for v in report["verdicts"] if v["id"] == port["id"])
    local = ok_json(capsys, "verify", "--working-tree")  # the explicit local look
    assert {v["id"]: v["verdict"] for v in local["verdicts"]}[scratch["id"]] == "stale"


def test_a_rename_that_loses_the_quote_is_stale_with_both_names(env, capsys):
    # git calls it a rename while the files are at least half alike: ten lines, one edited
    rest = "".join(f"Section {i} of the introduction.\n" for i in range(8))
    (env.repo / "README.md").write_text(f"# api\n\nThe worker pool has four threads.\n{rest}",
                                        "utf-8")
    git(env.repo, "commit", "-q", "-am", "longer readme")
    fact = add_file_fact(capsys, "The worker pool has four threads", "README.md:3",
                         "The worker pool has four threads.")
    git(env.repo, "mv", "README.md", "INTRO.md")
    (env.repo / "INTRO.md").write_text(f"# api\n\nThe worker pool has eight threads.\n{rest}",
                                       "utf-8")
    git(env.repo, "commit", "-q", "-am", "rename and edit")
    v = ok_json(capsys, "verify")["verdicts"][0]
    assert v["id"] == fact["id"] and v["verdict"] == "stale"
    assert v["reason"] == "README.md was renamed to INTRO.md and the quote is no longer in it"
    assert "3: The worker pool has eight threads." in v["context"]


def _confirm_in(capsys, repo: Path, monkeypatch, content: str) -> int:
    monkeypatch.chdir(repo)
    fact = add_file_fact(capsys, content, "deploy/api.yaml:4", "port: 8080")
    ok(capsys, "confirm", str(fact["id"]), "--reason", "checked the config")
    return fact["id"]


def test_rules_candidates_and_propose_never_touch_rule_files(env, capsys, monkeypatch):
    other = make_repo(env.tmp / "other", "https://github.com/globex/web.git")
    a = _confirm_in(capsys, env.repo, monkeypatch, "Services listen on port 8080")
    b = _confirm_in(capsys, other, monkeypatch, "Services listen on port 8080")
    monkeypatch.chdir(env.repo)
    cands = ok_json(capsys, "rules", "candidates")["candidates"]
    assert len(cands) == 1 and sorted(cands[0]["projects"]) == \
        ["github.com/acme/api", "github.com/globex/web"]
    cid = cands[0]["fact"]["id"]
    assert cid in (a, b)
    assert "held in: github.com/acme/api, github.com/globex/web" in ok(capsys, "rules",
                                                                         "candidates")

    agents = env.repo / "AGENTS.md"
    agents.write_bytes(b"# Rules\n\n- Use pnpm\n")
    git(env.repo, "add", "AGENTS.md")
    git(env.repo, "commit", "-q", "-m", "rules")
    before = (agents.read_bytes(), git(env.repo, "status", "--porcelain"),
              git(env.repo, "rev-parse", "HEAD"), (env.repo / ".git" / "index").read_bytes())

    out = ok(capsys, "rules", "propose", str(cid), "--to", "AGENTS.md")
    patch = env.repo / ".git" / "factbank" / f"rule-{cid}.patch"
    assert patch.is_file() and "+- Services listen on port 8080 (factbank #" in out
    assert "nothing applied" in out
    # the patch applies (a person can take it) ...
    git(env.repo, "apply", "--check", str(patch))
    # ... and nothing was applied
    after = (agents.read_bytes(), git(env.repo, "status", "--porcelain"),
             git(env.repo, "rev-parse", "HEAD"), (env.repo / ".git" / "index").read_bytes())
    assert after == before

    data = ok_json(capsys, "rules", "propose", str(cid), "--to", "CLAUDE.md", "--branch")
    assert data["branch"] == f"factbank/rule-{cid}"
    assert git(env.repo, "rev-list", "--count", f"main..{data['branch']}") == "1"
    assert git(env.repo, "show", f"{data['branch']}:CLAUDE.md").startswith(
        "## Rules promoted from factbank")
    assert not (env.repo / "CLAUDE.md").exists()
    assert (agents.read_bytes(), git(env.repo, "status", "--porcelain"),
            git(env.repo, "rev-parse", "HEAD"),
            (env.repo / ".git" / "index").read_bytes()) == before

    code, _, err = run(capsys, "rules", "propose", "999999", "--to", "AGENTS.md")
    assert code == 2 and "not a rule candidate" in err


CLAUDE_MD = """# Project notes

- The staging API listens on port 8443.
- Use pnpm, never npm.
- Never push to main directly.
- The deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 for CI.
- 缓存服务部署在上海机房的第二台机器上。

```sh
make test
```
"""


def test_migrate_native_proposes_saves_on_accept_and_is_idempotent(env, capsys, monkeypatch):
    (env.repo / "CLAUDE.md").write_text(CLAUDE_MD, "utf-8")
    mem = env.tmp / "home-dir" / ".claude" / "projects"
    mem = mem / "".join(c if c.isalnum() else "-" for c in str(env.repo.resolve())) / "memory"
    mem.mkdir(parents=True)
    (mem / "db.md").write_text("---\nname: db\ntype: project\n---\n\nThe database runs "
                               "PostgreSQL 18 with pgvector.\n", "utf-8")

    plan = ok_json(capsys, "migrate-native", "claude", "--dry-run")
    assert plan["backup"] is None and plan["files"] == 2
    wheres = [c["where"] for c in plan["candidates"]]
    assert wheres[:3] == ["CLAUDE.md:3", "CLAUDE.md:6", "CLAUDE.md:7"]
    assert wheres[3].endswith("db.md:6")
    assert [r["where"] for r in plan["rules"]] == ["CLAUDE.md:4", "CLAUDE.md:5"]
    assert {c["check"]["verdict"] for c in plan["candidates"]} == {"new"}
    token = next(c for c in plan["candidates"] if c["where"] == "CLAUDE.md:6")
    assert token["check"]["redacted"]
    assert not (env.tmp / "xdg-data").exists()  # a dry run writes nothing, not even a backup

    before = (env.repo / "CLAUDE.md").read_bytes()
    plan = ok_json(capsys, "migrate-native", "claude", "--accept-all")
    assert all(c["saved"] for c in plan["candidates"])
    assert plan["lacking_questions"] == 4  # native memory lines come without questions
    backup = Path(plan["backup"])
    assert (backup / "repo" / "CLAUDE.md").read_bytes() == before
    assert (env.repo / "CLAUDE.md").read_bytes() == before  # rules stay rules, file untouched
    saved = ok_json(capsys, "get", str(plan["candidates"][0]["saved"]))
    assert saved["source"] == {"kind": "file", "location": "CLAUDE.md:3"}
    assert saved["quote"] == "The staging API listens on port 8443."
    assert saved["fingerprint"]["path"] == "CLAUDE.md"
    secret = ok_json(capsys, "get", str(plan["candidates"][1]["saved"]))
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in json.dumps(secret)

    again = ok_json(capsys, "migrate-native", "claude", "--accept-all")
    assert {c["check"]["verdict"] for c in again["candidates"]} == {"same_claim"}
    assert not any(c["saved"] for c in again["candidates"])
    assert again["backup"] == plan["backup"]
    assert "lacking_questions" not in again  # nothing saved: nothing to ask
    text = ok(capsys, "migrate-native", "claude")
    assert "ghp_" not in text and "(not shown: it holds a github_token; saved redacted)" in text
    assert "no writer questions" not in text
    assert "4 candidate fact(s): 0 new, 4 already stored, 0 refused; 0 saved" in text
    assert "left alone (2 instruction line(s): rules stay rules):" in text


def test_confirm_with_a_fresh_quote_revives_a_stale_fact(env, capsys):
    fact = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    (env.repo / "deploy" / "api.yaml").write_text(
        "service: api\n# quoted now\nserver:\n  host: 0.0.0.0\n  port: '8080'\n  workers: 4\n",
        "utf-8")
    git(env.repo, "commit", "-q", "-am", "quote the port")
    assert ok_json(capsys, "verify")["verdicts"][0]["verdict"] == "stale"
    code, _, err = run(capsys, "confirm", str(fact["id"]))
    assert code == 2 and "fresh quote" in err  # the server refuses a bare confirm
    code, _, err = run(capsys, "confirm", str(fact["id"]), "--quote", "port: 9999")
    assert code == 2 and "the quote is not in deploy/api.yaml" in err
    got = ok_json(capsys, "confirm", str(fact["id"]), "--quote", "port: '8080'",
                  "--reason", "still 8080, quoted")
    assert got["status"] == "active" and got["stale"] is None
    assert got["source"]["location"] == "deploy/api.yaml:5"
    assert got["fingerprint"]["line"] == 5
    events = [e["kind"] for e in ok_json(capsys, "history", str(fact["id"]))["events"]]
    assert events[-2:] == ["confirmed", "refreshed"]
    assert ok_json(capsys, "verify")["verdicts"][0]["verdict"] == "fresh"


def test_verify_never_sends_a_teammates_location_outside_the_repository(env, capsys):
    """A hostile location, end to end: a member with write scope stores facts whose locations leave
    the repository (the hostile table's kinds the server accepts); the teammate's `factbank
    verify` skips each one and the bank holds none of the private lines afterwards (no stale
    context, no reason quoting them), while a fact inside the repository is still judged."""
    import httpx

    from tests.unit.hostile_fs import SECRET, SECRET_LINE

    private = env.tmp / "private"
    private.mkdir()
    (private / "notes.txt").write_text(f"alpha\n{SECRET_LINE}\nomega\n")
    (env.repo / "link.txt").symlink_to("../private/notes.txt")
    (env.repo / "linkdir").symlink_to("../private")
    (env.repo / ".gitignore").write_text(".env\n")
    (env.repo / ".env").write_text(f"TOKEN={SECRET}\n{SECRET_LINE}\n")
    git(env.repo, "add", "-A")
    git(env.repo, "commit", "-q", "-m", "links")
    with open(env.repo / ".git" / "config", "a") as fh:
        fh.write(f'[remote "x"]\n\turl = https://u:{SECRET}@example.com/r.git\n')
    hostile = ["../private/notes.txt:2", f"{private / 'notes.txt'}:2", "link.txt:2",
               "linkdir/notes.txt:2", "docs/../../private/notes.txt:2", ".git/config:2",
               ".env:2", "~/notes.txt:2", "..\\private\\notes.txt:2"]
    ids = []
    with httpx.Client(base_url=env.ingest,
                      headers={"Authorization": f"Bearer {env.personal.rw}"}) as http:
        for n, location in enumerate(hostile):
            r = http.post("/v1/facts", json={
                "content": f"Teammate claim number {n} about a file", "category":
                "project", "source": {"kind": "file", "location": location},
                "quote": "a quote that is in no file", "tags": ["t"],
                "project": "github.com/acme/api"})
            assert r.status_code in (200, 201), r.text
            ids.append(r.json()["fact"]["id"])
    inside = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                           "port: 8080")
    (env.repo / "deploy" / "api.yaml").write_text(API_YAML.replace("8080", "9090"), "utf-8")
    git(env.repo, "commit", "-q", "-am", "port 9090")  # only a commit is evidence
    report = ok_json(capsys, "verify")
    skipped = {s["id"]: s["reason"] for s in report["skipped"]}
    assert set(ids) <= set(skipped), (ids, report)
    assert all(reason.startswith("not read") for i, reason in skipped.items() if i in ids)
    assert [v["verdict"] for v in report["verdicts"] if v["id"] == inside["id"]] == ["stale"]
    code, out, err = run(capsys, "export")
    assert code == 0, err
    at = out.find(SECRET)
    assert at < 0, out[max(0, at - 300):at + 100]
    assert "the private note" not in out
    assert "9090" in out  # the inside fact's stale context did go to the bank


def test_a_commit_made_while_a_quiet_verify_reads_is_still_checked(env, capsys, monkeypatch):
    """The hooks' race: a session-start `verify --quiet` is reading the repository when the
    user commits; the post-commit `verify --quiet` finds the lock taken and leaves. The
    running one must then run once more, or the fact the commit broke stays fresh."""
    from factbank_client.cli import staleness as cli_staleness
    from factbank_client.cli.main import main

    port = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                         "port: 8080")
    real = cli_staleness.run_verify
    calls: list[str] = []

    def session_start_verify(*args, **kwargs):
        report = real(*args, **kwargs)  # read before the commit: fresh
        calls.append(next(v["verdict"] for v in report["verdicts"] if v["id"] == port["id"]))
        if len(calls) == 1:
            (env.repo / "deploy" / "api.yaml").write_text(API_YAML.replace("8080", "9090"),
                                                          "utf-8")
            git(env.repo, "commit", "-q", "-am", "port 9090")
            assert main(["verify", "--quiet"]) == 0  # the post-commit hook's run, in between
        return report

    monkeypatch.setattr(cli_staleness, "run_verify", session_start_verify)
    code, out, _ = run(capsys, "verify", "--quiet")
    assert code == 0
    assert calls == ["fresh", "stale"]
    lines = out.strip().splitlines()
    assert len(lines) == 2 and f"(stale: #{port['id']})" in lines[1], out
    fact = ok_json(capsys, "get", str(port["id"]))
    assert fact["status"] == "stale", fact
