"""`factbank verify --diff BASE..HEAD` / `--staged` and the pre-push hook, against the real
services and a scripted history made with the real `git` (as evals/staleness.py does).

The history: facts quoting lines of three files at BASE; then commits that edit a quoted
line, insert lines above another quote, rename a file cleanly, delete a file and edit a line
nobody quoted. Each fact's expected effect is written down by the script, not derived by the
code under test. The bank must be unchanged by the report (every fact active, no event)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from factbank_client.cli.main import main
from tests.conftest import git, git_env
from tests.integration.cli_env import run
from tests.integration.cli_repo import add_file_fact
from tests.integration.cli_repo import env as env  # the fixture

CONFIG = "service: api\nserver:\n  host: 0.0.0.0\n  port: 8080\n  workers: 4\n"
NOTES = "# notes\n\nThe cache keeps entries for ten minutes.\nRetries: three.\n"
OLD = "# old\n\nThe legacy importer runs nightly.\n"


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    # FACTBANK_VERIFY=0: an installed post-commit hook must not mark facts stale meanwhile
    git(repo, "commit", "-q", "-m", message, env={**os.environ, "FACTBANK_VERIFY": "0"})
    return git(repo, "rev-parse", "HEAD")


def scripted(env, capsys) -> dict[str, int]:
    repo = env.repo
    (repo / "deploy" / "api.yaml").write_text(CONFIG)
    (repo / "docs").mkdir()
    (repo / "docs" / "notes.md").write_text(NOTES)
    (repo / "docs" / "old.md").write_text(OLD)
    commit(repo, "base")
    git(repo, "tag", "base")
    ids = {
        "edited": add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                                "port: 8080")["id"],
        "drifted": add_file_fact(capsys, "The API runs four workers", "deploy/api.yaml:5",
                                 "workers: 4")["id"],
        "renamed": add_file_fact(capsys, "The cache keeps entries for ten minutes",
                                 "docs/notes.md:3",
                                 "The cache keeps entries for ten minutes.")["id"],
        "deleted": add_file_fact(capsys, "The legacy importer runs nightly", "docs/old.md:3",
                                 "The legacy importer runs nightly.")["id"],
        "untouched": add_file_fact(capsys, "The worker pool has four threads", "README.md:3",
                                   "The worker pool has four threads.")["id"],
        "same": add_file_fact(capsys, "The API binds every interface", "deploy/api.yaml:3",
                              "host: 0.0.0.0")["id"],
    }
    # The change: port edited and two lines inserted above the workers line (the host line
    # too moves by... nothing: the insertion is after it), notes renamed cleanly, old deleted.
    (repo / "deploy" / "api.yaml").write_text(CONFIG.replace(
        "  port: 8080\n", "  port: 9090\n  # tuned for the new hosts\n  timeout: 30\n"))
    git(repo, "mv", "docs/notes.md", "docs/cache.md")
    git(repo, "rm", "-q", "docs/old.md")
    commit(repo, "the change")
    return ids


EXPECTED = {"edited": "stale", "drifted": "moved", "renamed": "moved", "deleted": "stale",
            "untouched": "unaffected", "same": "unaffected"}


def test_diff_reports_each_effect_and_changes_nothing(env, capsys):
    ids = scripted(env, capsys)
    code, out, err = run(capsys, "verify", "--diff", "base..HEAD", "--json")
    assert code == 1, (out, err)  # a fact would go stale: the CI's failure
    report = json.loads(out)
    assert report["checked"] == len(ids) and report["exit"] == 1
    assert report["counts"] == {"stale": 2, "moved": 2, "unaffected": 2, "unknown": 0}
    got = {r["id"]: r for r in report["facts"]}
    for name, effect in EXPECTED.items():
        if effect == "unaffected":
            assert ids[name] not in got
        else:
            assert got[ids[name]]["effect"] == effect, (name, got.get(ids[name]))
    edited = got[ids["edited"]]
    assert edited["new_location"] == "deploy/api.yaml:4" and edited["new_text"] == "port: 9090"
    assert edited["command"] == (
        f"factbank supersede '<the claim as it is now>' {ids['edited']} --reason "
        f"'changed by {report['range']}' --source deploy/api.yaml:4 --quote 'port: 9090'")
    assert got[ids["drifted"]]["new_location"] == "deploy/api.yaml:7"
    assert got[ids["drifted"]]["command"] == (
        f"factbank confirm {ids['drifted']} --source deploy/api.yaml:7 --quote 'workers: 4'")
    assert got[ids["renamed"]]["new_location"] == "docs/cache.md:3"
    assert "deletes" in got[ids["deleted"]]["reason"] or "deleted" in got[ids["deleted"]][
        "reason"]
    # The printed command works: run on the branch, it settles the fact.
    code, out, err = run(capsys, "confirm", str(ids["drifted"]), "--source",
                         "deploy/api.yaml:7", "--quote", "workers: 4")
    assert code == 0, (out, err)

    # Nothing in the bank changed but that confirm: every fact active, no stale event.
    for name, fid in ids.items():
        code, out, _ = run(capsys, "history", str(fid), "--json")
        got = json.loads(out)
        assert got["fact"]["status"] == "active", name
        kinds = [e["kind"] for e in got["events"]]
        assert kinds[:2] == ["created", "confirmed"] if name == "drifted" else \
            kinds == ["created"], kinds
    assert json.loads(run(capsys, "get", str(ids["edited"]), "--json")[1])["source"][
        "location"] == "deploy/api.yaml:4"


def test_text_markdown_exit_codes_and_errors(env, capsys):
    ids = scripted(env, capsys)
    code, out, _ = run(capsys, "verify", "--diff", "base..HEAD")
    assert code == 1
    assert f"#{ids['edited']} would go stale: deploy/api.yaml:4" in out
    assert "2 would go stale, 2 would move, 2 unaffected" in out.splitlines()[-1]
    code, md, _ = run(capsys, "verify", "--diff", "base..HEAD", "--markdown")
    assert code == 1 and md.startswith("<!-- factbank-verify -->\n### factbank: 2 facts would "
                                       "go stale, 2 would move")
    assert "| fact | source | after this change |" in md and "```sh\nfactbank supersede" in md
    assert run(capsys, "verify", "--diff", "base..HEAD", "--fail-on", "never")[0] == 0
    assert run(capsys, "verify", "--diff", "base..HEAD", "--fail-on", "moved")[0] == 1
    # BASE...HEAD (a pull request's merge base) and BASE alone mean the same here.
    assert json.loads(run(capsys, "verify", "--diff", "base...HEAD", "--json")[1])[
        "counts"]["stale"] == 2
    assert json.loads(run(capsys, "verify", "--diff", "base", "--json")[1])[
        "counts"]["stale"] == 2
    # A change that touches no quoted line: exit 0 even with --fail-on moved.
    (env.repo / "docs" / "cache.md").write_text(NOTES + "More text.\n")
    commit(env.repo, "append")
    assert run(capsys, "verify", "--diff", "HEAD~1..HEAD", "--fail-on", "moved")[0] == 0
    # Could not run: exit 2, one line naming the revision.
    code, _, err = run(capsys, "verify", "--diff", "nosuch..HEAD")
    assert code == 2 and "'nosuch' is not a commit here" in err
    assert run(capsys, "verify", "--markdown")[0] == 2  # --markdown goes with --diff


def test_staged_reports_what_the_index_would_commit(env, capsys):
    ids = scripted(env, capsys)
    target = env.repo / "README.md"
    target.write_text(target.read_text().replace("four threads", "eight threads"))
    code, out, _ = run(capsys, "verify", "--staged", "--json")
    assert code == 0 and json.loads(out)["counts"]["stale"] == 0  # not staged yet
    git(env.repo, "add", "README.md")
    code, out, _ = run(capsys, "verify", "--staged", "--json")
    report = json.loads(out)
    assert code == 1 and [r["id"] for r in report["facts"]] == [ids["untouched"]]
    assert report["head"] is None and report["range"] == "the staged change"


def test_pre_push_hook_warns_and_blocks_only_when_asked(env, capsys, tmp_path):
    remote = tmp_path / "remote.git"  # "backup": origin stays (it names the project)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(env.repo, "remote", "add", "backup", str(remote))
    git(env.repo, "push", "-q", "backup", "main")
    ids = scripted(env, capsys)
    assert main(["install", "git", "--pre-push"]) == 0
    hook = env.repo / ".git" / "hooks" / "pre-push"
    assert "-m factbank_client.cli.main verify --diff" in hook.read_text()
    # The stack serves in this process; the hook runs in a git subprocess: same environment.
    push_env = git_env({**os.environ})
    pushed = subprocess.run(["git", "-C", str(env.repo), "push", "backup", "main"],
                            capture_output=True, text=True, env=push_env, timeout=120)
    assert pushed.returncode == 0, pushed.stderr  # warns, never blocks by default
    assert f"#{ids['edited']} would go stale" in pushed.stderr
    assert git(remote, "rev-parse", "main") == git(env.repo, "rev-parse", "HEAD")
    # FACTBANK_PRE_PUSH=block refuses a push that makes a fact stale.
    (env.repo / "deploy" / "api.yaml").write_text("service: api\n")
    commit(env.repo, "drops the server block")
    blocked = subprocess.run(["git", "-C", str(env.repo), "push", "backup", "main"],
                             capture_output=True, text=True, timeout=120,
                             env={**push_env, "FACTBANK_PRE_PUSH": "block"})
    assert blocked.returncode != 0 and "push refused" in blocked.stderr
    assert git(remote, "rev-parse", "main") != git(env.repo, "rev-parse", "HEAD")
    # Uninstall removes both hooks (each exactly what install wrote).
    capsys.readouterr()
    assert main(["uninstall", "git"]) == 0
    assert not hook.exists() and not (env.repo / ".git" / "hooks" / "post-commit").exists()


def test_inject_preview_shows_the_block_as_the_checked_hook_prints_it(env, capsys,
                                                                      monkeypatch):
    fid = add_file_fact(capsys, "The API listens on port 8080", "deploy/api.yaml:4",
                        "port: 8080")["id"]
    assert f"#{fid} (trust" in run(capsys, "inject-preview")[1]
    (env.repo / "deploy" / "api.yaml").write_text("service: api\nport: 9090\n")  # uncommitted
    code, out, _ = run(capsys, "inject-preview")
    assert code == 0 and f"#{fid} (trust" not in out
    assert f"- #{fid}: the quote is no longer at deploy/api.yaml:4" in out
    data = json.loads(run(capsys, "inject-preview", "--json")[1])
    assert fid not in data["facts"]
    monkeypatch.setenv("FACTBANK_INJECT_CHECK", "0")
    assert fid in json.loads(run(capsys, "inject-preview", "--json")[1])["facts"]
    assert json.loads(run(capsys, "history", str(fid), "--json")[1])["fact"]["status"] == \
        "active"
