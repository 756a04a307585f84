"""Every client command against the real services over real HTTP.

Both services run under uvicorn in a background thread on free ports, over the test's own
database; the CLI runs in-process (`main([...])`) with its config file in a temp dir and its
working directory in a temp git repository, so the project key is known.
"""

from __future__ import annotations

import json
import os

import pytest

from factbank.runtime.runner import free_port
from factbank.trust import DEFAULT as TRUST
from factbank_client import config as client_config
from factbank_client.cli.main import main
from factbank_client.client import Client, to_import_item
from factbank_client.errors import FactbankError
from tests.integration import cli_env
from tests.integration.cli_env import ADD_PNPM, login, ok, ok_json, run

env = cli_env.env  # the fixture, under the name these tests ask for

# --- login -------------------------------------------------------------------------------


def test_login_checks_the_token_and_writes_the_config(env, capsys):
    code, out, err = run(capsys, "login", "--url", env.urls.ingest_url, "--recall-url",
                         env.urls.recall_url, "--token", "fb_not_a_real_token")
    assert code == 2 and "not saved" in err and "401" in err
    assert not env.config_path.exists()

    out = ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url", env.urls.recall_url,
             "--token", env.personal.rw)
    assert "accept it" in out
    out = ok(capsys, "login", "--token", env.team.ro, "--bank", "team")
    cfg = env.config()
    assert cfg.tokens == {"personal": env.personal.rw, "team": env.team.ro}
    assert (cfg.url, cfg.recall_url) == (env.urls.ingest_url, env.urls.recall_url)
    assert oct(env.config_path.stat().st_mode & 0o777) == "0o600"


def test_login_warns_when_a_team_token_is_saved_as_personal(env, capsys):
    """a member's team token saved without --bank made their writes say "stored
    in personal": login now says which bank the token belongs to when the label differs."""
    code, out, err = run(capsys, "login", "--url", env.urls.ingest_url, "--recall-url",
                         env.urls.recall_url, "--token", env.team.rw)
    assert code == 0 and "accept it" in out
    assert "belongs to the team bank 'acme' but is saved as your personal bank" in err
    assert "factbank login --bank team --token" in err
    code, out, err = run(capsys, "login", "--token", env.team.rw, "--bank", "team")
    assert code == 0 and "warning" not in err
    code, out, err = run(capsys, "login", "--token", env.personal.rw, "--bank", "personal")
    assert code == 0 and "warning" not in err


def test_login_saves_exactly_the_urls_it_checked(env, capsys):
    # a login to a mistyped port, then `login --token`, then the right `--url`: the
    # last one said "accepts it" while every read still went to the dead port's recall.
    # (such a login is saved only with --force.)
    dead = f"http://127.0.0.1:{free_port()}"
    code, out, _ = run(capsys, "login", "--url", dead, "--token", env.personal.rw, "--force")
    assert code == 0 and "check failed" in out and "accept it" not in out
    code, out, _ = run(capsys, "login", "--token", env.personal.rw, "--force")
    assert code == 0 and "check failed" in out
    right_recall = client_config._next_port(env.urls.ingest_url)
    # The test services are on random ports: only --url is the user's input here; the recall
    # URL the config ends with must be the one checked, whichever it is.
    code, _, _ = run(capsys, "login", "--url", env.urls.ingest_url, "--token",
                     env.personal.rw, "--force")
    cfg = env.config()
    assert cfg.url == env.urls.ingest_url
    assert cfg.recall_url == right_recall, "the recall URL of the old, dead login was kept"
    assert dead not in env.config_path.read_text("utf-8")
    # With the real recall URL named, both are checked and saved, and reads work.
    out = ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url",
             env.urls.recall_url, "--token", env.personal.rw)
    assert f"{env.urls.ingest_url} and {env.urls.recall_url} accept it" in out
    assert env.config().recall_url == env.urls.recall_url
    ok(capsys, "search", "anything")
    # A later `login --token` keeps (and re-checks) the URLs saved, not derived ones.
    out = ok(capsys, "login", "--token", env.personal.rw)
    assert "accept it" in out and env.config().recall_url == env.urls.recall_url


def test_login_checks_the_token_on_both_services(env, capsys):
    # A recall URL that answers, an ingest URL that does not know the token: not saved.
    code, _, err = run(capsys, "login", "--url", env.urls.ingest_url, "--recall-url",
                       env.urls.recall_url, "--token", "fb_not_a_real_token")
    assert code == 2 and "refused the token" in err
    assert not env.config_path.exists()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_login_normalises_every_spelling_of_a_url(env, capsys):
    """`--url 127.0.0.1:28701` was saved as is and its recall URL derived as
    `//127.0.0.1:81/127.0.0.1:28701`. Each spelling of the running services is saved as the
    one canonical URL, checked."""
    ingest, recall = _port(env.urls.ingest_url), _port(env.urls.recall_url)
    spellings = [
        (f"127.0.0.1:{ingest}", f"127.0.0.1:{recall}"),
        (f"127.0.0.1:{ingest}/", f"http://127.0.0.1:{recall}/"),
        (f"HTTP://127.0.0.1:{ingest}", f"  127.0.0.1:{recall}  "),
        (f"localhost:{ingest}", f"LOCALHOST:{recall}/"),
        (str(ingest), str(recall)),
    ]
    for url, recall_url in spellings:
        out = ok(capsys, "login", "--url", url, "--recall-url", recall_url,
                 "--token", env.personal.rw)
        host = "localhost" if "localhost" in url else "127.0.0.1"
        cfg = env.config()
        assert (cfg.url, cfg.recall_url) == (f"http://{host}:{ingest}",
                                             f"http://{host}:{recall}"), (url, recall_url)
        assert "accept it" in out


def test_login_never_replaces_a_working_config_with_a_broken_one(env, capsys):
    """A wrong port, a malformed URL, a refused token, an unchecked save: each exits 2 with
    one error line, and the working config stays byte for byte; --force saves anyway."""
    login(capsys, env)
    working = env.config_path.read_bytes()
    dead = free_port()
    cases = [
        (("--url", f"127.0.0.1:{dead}"), "cannot connect"),
        (("--url", env.urls.ingest_url, "--recall-url", f"127.0.0.1:{dead}"), "cannot connect"),
        (("--url", env.urls.ingest_url, "--recall-url", env.urls.ingest_url),
         "recall at"),
        (("--url", "ftp://127.0.0.1:8701"), "scheme must be http"),
        (("--url", "http://127.0.0.1:99999"), "port must be a number"),
        (("--url", "http://me:secret@127.0.0.1:8701"), "no user or password"),
        (("--url", "127.0.0.1:8701/?x=1"), "no ?query"),
        (("--url", ""), "--url is empty"),
        (("--url", env.personal.rw), "host may hold"),
        (("--no-check", "--url", f"127.0.0.1:{dead}"), "current config works"),
    ]
    for extra, why in cases:
        code, out, err = run(capsys, "login", "--token", env.personal.rw, *extra)
        assert code == 2, (extra, out, err)
        assert why in err, (extra, err)
        assert err.count("not saved") == 1 and len(err.strip().splitlines()) == 1, err
        assert ".." not in err and err.count("--force") <= 1, err
        assert "secret" not in err and env.personal.rw not in err
        assert env.config_path.read_bytes() == working, extra
    code, out, _ = run(capsys, "login", "--token", "fb_not_a_real_token_000000000000")
    assert code == 2 and env.config_path.read_bytes() == working
    # Asked for: saved, with the problem said once on stderr.
    code, out, err = run(capsys, "login", "--url", f"127.0.0.1:{dead}", "--token",
                         env.personal.rw, "--force", "--json")
    assert code == 0 and json.loads(out)["checked"] is False
    assert err.count("cannot connect") == 2 and env.config().url == f"http://127.0.0.1:{dead}"


def test_commands_without_a_login_say_how_to_log_in(env, capsys):
    code, _, err = run(capsys, "search", "anything")
    assert code == 2 and "factbank login" in err


# --- add and the local quote check --------------------------------------------------------


def test_add_get_history(env, capsys):
    login(capsys, env)
    out = ok(capsys, *ADD_PNPM)
    assert out.startswith("stored fact ") and "in personal" in out
    fid = int(out.split()[2])

    fact = ok_json(capsys, "get", str(fid))
    assert fact["content"] == "The team uses pnpm, never npm"
    assert fact["tags"] == ["pnpm", "包管理器", "package manager"]
    assert fact["origin"] == "user" and fact["project"] is None
    assert fact["created_by"]["agent"] == "cli" and fact["bank_label"] == "personal"

    out = ok(capsys, "get", str(fid))
    assert f"#{fid}  active" in out and "we use pnpm, never npm" in out

    # The same claim again reinforces instead of storing a second copy.
    out = ok(capsys, *ADD_PNPM)
    assert out.startswith(f"reinforced fact {fid} ")

    hist = ok_json(capsys, "history", str(fid))
    assert hist["events"][0]["kind"] == "created"
    out = ok(capsys, "history", str(fid))
    assert "EVENT" in out and "created" in out


REDIS_QUESTIONS = ("Which cache port does the billing service use?", "账单服务的缓存开在哪个端口？")


def test_add_with_questions_then_add_more_and_search_through_one(env, capsys):
    login(capsys, env)
    fact = ok_json(capsys, "add", "ledgerline's Redis runs on port 6380 in staging",
                   "--category", "environment", "--source-kind", "user", "--quote",
                   "redis: 6380", "--tag", "redis", "--question", REDIS_QUESTIONS[0],
                   "--global")["fact"]
    assert fact["questions"] == [REDIS_QUESTIONS[0]]
    ok_json(capsys, "add", "The CI runners are on host ci-02", "--category", "environment",
            "--source-kind", "user", "--quote", "ci-02", "--tag", "ci", "--global")

    # Adding reads the stored list and saves old + new (a PATCH replaces the list).
    out = ok(capsys, "questions", str(fact["id"]), "--add", REDIS_QUESTIONS[1],
             "--add", REDIS_QUESTIONS[0])
    assert f"fact {fact['id']} in personal now has 2 questions" in out
    stored = ok_json(capsys, "get", str(fact["id"]))
    assert stored["questions"] == list(REDIS_QUESTIONS)
    assert f"questions: {REDIS_QUESTIONS[0]} | {REDIS_QUESTIONS[1]}" in ok(
        capsys, "get", str(fact["id"]))

    data = ok_json(capsys, "search", "账单服务的缓存开在哪个端口")
    top = data["results"][0]
    assert top["fact"]["id"] == fact["id"] and top["match"] == "question: " + REDIS_QUESTIONS[1]
    out = ok(capsys, "search", "账单服务的缓存开在哪个端口")
    assert "MATCHED QUESTION" in out.splitlines()[0]
    assert REDIS_QUESTIONS[1] in out.splitlines()[1]

    code, _, err = run(capsys, "questions", str(fact["id"]),
                       *[x for i in range(5) for x in ("--add", f"question {i}?")])
    assert code == 2 and "questions" in err and "422" in err
    assert ok_json(capsys, "get", str(fact["id"]))["questions"] == list(REDIS_QUESTIONS)


def test_add_file_source_quote_is_checked_locally(env, capsys):
    login(capsys, env)
    base = ("add", "The API listens on port 8080", "--category", "environment",
            "--tag", "api", "--tag", "端口")
    # Not in the file: refused before anything is sent.
    code, _, err = run(capsys, *base, "--source", "deploy/api.yaml:4", "--quote", "port: 9090")
    assert code == 2 and "not in deploy/api.yaml" in err
    # In the file, but not at the line given: refused, naming the right line.
    code, _, err = run(capsys, *base, "--source", "deploy/api.yaml:2", "--quote", "port: 8080")
    assert code == 2 and "at line 4, not 2" in err
    # Missing file.
    code, _, err = run(capsys, *base, "--source-kind", "file", "--source", "deploy/nope.yaml",
                       "--quote", "port: 8080")
    assert code == 2 and "not found" in err
    assert list(Client(env.config()).list_facts()) == []

    # Whitespace is normalised ("port:   8080" in the file), the kind is inferred from the
    # path, and the location is stored relative to the repository even from a subdirectory.
    os.chdir(env.repo / "deploy")
    outcome = ok_json(capsys, *base, "--source", "api.yaml:4", "--quote", "port: 8080",
                      "--origin", "verified")
    fact = outcome["fact"]
    assert fact["source"] == {"kind": "file", "location": "deploy/api.yaml:4"}
    assert fact["project"] == env.project
    assert outcome["status"] == "stored" and outcome["bank"] == "personal"


def test_add_refused_by_the_server_shows_every_reason(env, capsys):
    login(capsys, env)
    code, _, err = run(capsys, "add", "x" * 1200, "--category", "environment",
                       "--source-kind", "url", "--source", "the wiki", "--quote", "q")
    assert code == 2
    assert err.startswith("factbank: [personal] 422 refused:")
    for words in ("content: content is 1200 characters", "source.location"):
        assert words in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "add", "Deploys use ansible", "--category", "rumours",
                       "--source-kind", "user", "--quote", "we deploy with ansible")
    assert code == 2 and "category" in err and "rumours" in err


def test_add_goes_to_the_team_bank_for_team_categories_or_bank_flag(env, capsys):
    login(capsys, env, team=True)
    cfg = env.config_path.read_text()
    env.config_path.write_text('team_categories = ["decisions"]\n' + cfg)
    out = ok_json(capsys, "add", "We chose Postgres over MySQL for pgvector", "--category",
                  "decisions", "--source-kind", "user", "--quote", "we chose postgres",
                  "--tag", "postgres", "--tag", "数据库")
    assert out["bank"] == "team" and out["fact"]["bank"] == "acme"
    out = ok_json(capsys, "add", "Staging runs on host stg1", "--category", "environment",
                  "--source-kind", "user", "--quote", "staging is stg1", "--bank", "team")
    assert out["bank"] == "team"
    # Ops by id find the bank that holds the id.
    fid = out["fact"]["id"]
    assert ok_json(capsys, "get", str(fid))["bank_label"] == "team"
    code, _, err = run(capsys, "get", "999999")
    assert code == 2 and "not found in any configured bank" in err


# --- confirm, dispute, delete, supersede --------------------------------------------------


def test_confirm_dispute_delete(env, capsys):
    login(capsys, env)
    fid = ok_json(capsys, *ADD_PNPM)["fact"]["id"]
    t0 = ok_json(capsys, "get", str(fid))["trust"]
    out = ok(capsys, "confirm", str(fid), "--reason", "user said it again")
    assert out.startswith(f"confirmed fact {fid} in personal")
    t1 = ok_json(capsys, "get", str(fid))["trust"]
    assert t1 > t0
    fact = ok_json(capsys, "dispute", str(fid), "--reason", "saw npm in CI")
    assert fact["trust"] < t1 and fact["bank_label"] == "personal"
    out = ok(capsys, "delete", str(fid), "--reason", "wrong bank")
    assert "status deleted" in out
    kinds = [e["kind"] for e in ok_json(capsys, "history", str(fid))["events"]]
    assert kinds[:1] == ["created"] and {"confirmed", "disputed", "deleted"} <= set(kinds)
    code, _, err = run(capsys, "confirm", "424242")
    assert code == 2 and "404" in err


def test_supersede_defaults_from_the_old_fact_and_links_history(env, capsys):
    login(capsys, env)
    old = ok_json(capsys, "add", "The API listens on port 8080", "--category", "environment",
                  "--source", "deploy/api.yaml:4", "--quote", "port: 8080",
                  "--tag", "api", "--tag", "端口")["fact"]
    (env.repo / "deploy" / "api.yaml").write_text("server:\n  port: 8081\n", "utf-8")
    out = ok(capsys, "supersede", str(old["id"]), "--reason", "moved in the deploy change",
             "--content", "The API listens on port 8081", "--source", "deploy/api.yaml:2",
             "--quote", "port: 8081")
    assert f"supersedes #{old['id']}: moved in the deploy change" in out
    hist = ok_json(capsys, "history", str(old["id"]))
    assert hist["fact"]["status"] == "superseded"
    new = hist["current"]
    assert new["content"] == "The API listens on port 8081"
    assert new["category"] == "environment" and new["tags"] == ["api", "端口"]
    assert new["project"] == env.project
    out = ok(capsys, "get", str(old["id"]))
    assert f"current:  #{new['id']}" in out
    # A near-duplicate that is a different claim is stored, and the output says what to do.
    out = ok(capsys, "add", "The API listens on port 8082", "--category", "environment",
             "--source-kind", "user", "--quote", "the API is on 8082", "--tag", "api")
    third = int(out.split()[2])
    assert out.startswith("stored fact") and f"similar to #{new['id']}" in out
    assert f"factbank supersede CONTENT {new['id']} {third} --reason" in out
    code, _, err = run(capsys, "supersede", str(old["id"]), "--reason", "again", "--content",
                       "x", "--source-kind", "user", "--quote", "x")
    assert code == 2 and "already superseded" in err


# --- categories ---------------------------------------------------------------------------


def test_categories_list_and_add(env, capsys):
    login(capsys, env, team=True)
    data = ok_json(capsys, "categories")
    assert set(data) == {"personal", "team"}
    assert "preferences" in {c["name"] for c in data["personal"]}
    out = ok(capsys, "categories", "add", "runbooks", "--description", "How to operate")
    assert "added category 'runbooks' to personal" in out
    out = ok(capsys, "categories")
    assert "runbooks" in out and "NAME" in out
    code, _, err = run(capsys, "categories", "add", "runbooks")
    assert code == 2 and "409" in err
    code, _, err = run(capsys, "categories", "add", "Bad Name")
    assert code == 2 and "name" in err


# --- export and import --------------------------------------------------------------------


def test_export_import_round_trip_between_banks(env, capsys, tmp_path):
    login(capsys, env, team=True)
    a = ok_json(capsys, *ADD_PNPM, "--question", "npm or pnpm?")["fact"]
    b = ok_json(capsys, "add", "The API listens on port 8080", "--category", "environment",
                "--source", "deploy/api.yaml:4", "--quote", "port: 8080", "--tag", "api")["fact"]
    (env.repo / "deploy" / "api.yaml").write_text("port: 8081\n", "utf-8")
    c = ok_json(capsys, "supersede", str(b["id"]), "--reason", "moved", "--content",
                "The API listens on port 8081", "--source", "deploy/api.yaml:1", "--quote",
                "port: 8081")["fact"]
    ok(capsys, "delete", str(c["id"]), "--reason", "test")
    dump = tmp_path / "personal.jsonl"
    code, _, err = run(capsys, "export", "--out", str(dump))
    assert code == 0 and "exported 2 facts" in err  # deleted facts are not exported
    lines = [json.loads(x) for x in dump.read_text().splitlines()]
    assert {x["id"]: x["status"] for x in lines} == {a["id"]: "active", b["id"]: "superseded"}
    assert ok(capsys, "export").strip().splitlines() == dump.read_text().strip().splitlines()

    out = ok(capsys, "import", str(dump), "--bank", "team")
    assert "imported 1 facts into team bank acme, visible to 1 member (alice): 1 stored" in out
    assert "skipped 1 non-active" in out
    team = list(Client(env.config()).list_facts(bank="team"))
    assert [f["content"] for f in team] == [a["content"]]
    assert team[0]["source"] == a["source"] and team[0]["tags"] == a["tags"]
    assert team[0]["questions"] == a["questions"] == ["npm or pnpm?"]
    assert team[0]["origin"] == "user" and team[0]["created_by"]["agent"] == "cli"


def test_import_is_one_transaction_and_lists_bad_lines(env, capsys, tmp_path):
    login(capsys, env)
    good = {"content": "Builds use make", "category": "project", "source": {"kind": "user"},
            "quote": "we build with make"}
    bad = {**good, "content": "Deploys use ansible", "category": "rumours"}
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in (good, bad, good)) + "\n")
    code, _, err = run(capsys, "import", str(f))
    assert code == 2 and "line 2" in err and "category" in err
    assert list(Client(env.config()).list_facts()) == []
    f.write_text(json.dumps(good) + "\n{not json\n")
    code, _, err = run(capsys, "import", str(f))
    assert code == 2 and ":2: malformed JSON" in err
    f.write_text(json.dumps(good) + "\n")
    data = ok_json(capsys, "import", str(f))
    assert data["stored"] == 1 and data["bank"] == "personal"


def test_import_says_how_many_facts_lack_questions_and_what_writes_them(env, capsys, tmp_path):
    """Imported facts usually come without writer questions, and then only searches worded
    like them find them: the import says how many of the bank's facts lack them and names
    `factbank enrich`; facts that bring questions (an export) leave nothing to say."""
    login(capsys, env)
    bare = [{"content": f"Worker w{i} drains queue q{i}", "category": "project",
             "source": {"kind": "user"}, "quote": f"w{i} drains q{i}"} for i in range(3)]
    asked = [{**bare[0], "content": "The nightly job runs at 02:00", "quote": "02:00",
              "questions": ["when does the nightly job run?", "夜间任务几点跑？"]}]
    f = tmp_path / "asked.jsonl"
    f.write_text(json.dumps(asked[0], ensure_ascii=False) + "\n", "utf-8")
    out = ok(capsys, "import", str(f), "--no-wait")
    assert "1 stored" in out and "no writer questions" not in out
    assert ok_json(capsys, "import", str(f), "--no-wait")["lacking_questions"] is None

    f = tmp_path / "bare.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in bare[:2]) + "\n", "utf-8")
    out = ok(capsys, "import", str(f), "--no-wait")
    assert "2 fact(s) in personal have no writer questions" in out
    assert "`factbank enrich` has an agent write them" in out
    assert "factbank enrich --list --lacking questions --bank personal" in out
    f.write_text(json.dumps(bare[2]) + "\n", "utf-8")
    data = ok_json(capsys, "import", str(f), "--no-wait")
    assert (data["stored"], data["lacking_questions"]) == (1, 3)
    listed = ok_json(capsys, "enrich", "--list", "--lacking", "questions")
    assert listed["remaining"] == 3  # the count the hint gave is the one enrich works down


def test_import_is_chunked_progress_tracks_commits_and_a_rerun_resumes(env, capsys, tmp_path,
                                                                        monkeypatch):
    from factbank_client import client as client_mod

    login(capsys, env)
    rows = [{"content": f"Service s{i} listens on port {9000 + i}", "category": "environment",
             "source": {"kind": "user"}, "quote": f"s{i} uses {9000 + i}",
             "tags": ["port", "端口"]} for i in range(7)]
    bad = {**rows[5], "category": "rumours"}
    f = tmp_path / "big.jsonl"
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False)
                           for r in [*rows[:5], bad, rows[6]]) + "\n")
    # Each chunk is its own request: count them, and what was committed when each returned.
    seen: list[int] = []
    real = client_mod.Client.import_lines

    def counting(self, lines, **kw):
        data = real(self, lines, **kw)
        seen.append(len(list(Client(env.config()).list_facts())))
        return data

    monkeypatch.setattr(client_mod.Client, "import_lines", counting)
    code, _, err = run(capsys, "import", str(f), "--chunk", "2")
    assert code == 2 and "the first 4 facts are imported" in err and "again to resume" in err
    assert seen == [2, 4], "each chunk is committed before the next is sent"
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    seen.clear()
    data = ok_json(capsys, "import", str(f), "--chunk", "2")
    assert (data["stored"], data["present"], data["reinforced"]) == (3, 4, 0)
    assert seen == [4, 4, 6, 7]
    facts = list(Client(env.config()).list_facts())
    assert len(facts) == 7 and {x["trust"] for x in facts} == {facts[0]["trust"]}
    code, _, err = run(capsys, "import", str(f), "--chunk", "0")
    assert code == 2 and "--chunk" in err


def test_import_wait_tracks_the_servers_vector_queue(env, capsys, tmp_path, monkeypatch):
    """`import` commits without waiting for the embedder (vectors=queue); --wait
    follows the server's own `vectors_pending` to 0, driven by the ingest worker that runs
    in the service, and then the facts are found by meaning."""
    from factbank_client import client as client_mod

    login(capsys, env)
    rows = [{"content": f"The report job r{i} writes to bucket reports-{i}",
             "category": "environment", "source": {"kind": "user"},
             "quote": f"r{i} -> reports-{i}",
             "questions": [f"Where does report job r{i} write?"]} for i in range(6)]
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    seen: list[int] = []
    real = client_mod.Client.wait_for_vectors

    def watching(self, bank, **kw):
        for n in real(self, bank, poll=0.2, **kw):
            seen.append(n)
            yield n

    monkeypatch.setattr(client_mod.Client, "wait_for_vectors", watching)
    data = ok_json(capsys, "import", str(f), "--wait")
    assert data["stored"] == 6
    assert seen and seen[-1] == 0 and seen == sorted(seen, reverse=True)
    assert ok_json(capsys, "stats")["personal"]["vectors_pending"] == 0
    found = ok_json(capsys, "search", "which bucket does report job r3 write to?",
                    "--mode", "dense")
    assert "reports-3" in json.dumps(found)
    seen.clear()
    ok_json(capsys, "import", str(f), "--no-wait")  # all present: nothing to wait for
    assert seen == []


def test_export_import_round_trips_statuses_links_and_trust(env, capsys, tmp_path):
    """Export, then import: into the same bank, nothing changes (no reinforcement, no
    superseded claim back as active); into a fresh bank, statuses, links and trust return."""
    login(capsys, env, team=True)
    a = ok_json(capsys, *ADD_PNPM, "--question", "npm or pnpm?")["fact"]
    b = ok_json(capsys, "add", "The API listens on port 8080", "--category", "environment",
                "--source", "deploy/api.yaml:4", "--quote", "port: 8080", "--tag", "api")["fact"]
    (env.repo / "deploy" / "api.yaml").write_text("port: 8081\n", "utf-8")
    c = ok_json(capsys, "supersede", str(b["id"]), "--reason", "moved", "--content",
                "The API listens on port 8081", "--source", "deploy/api.yaml:1", "--quote",
                "port: 8081")["fact"]
    d = ok_json(capsys, "add", "Deploys happen on Fridays", "--category", "project",
                "--source-kind", "user", "--quote", "we deploy on fridays")["fact"]
    ok(capsys, "dispute", str(d["id"]), "--reason", "not any more")
    ok(capsys, "confirm", str(a["id"]), "--reason", "the user said it again")
    dump = tmp_path / "personal.jsonl"
    assert run(capsys, "export", "--out", str(dump))[0] == 0

    exported = [json.loads(x) for x in dump.read_text().splitlines()]
    before = {x["content"]: (x["status"], round(x["trust"], 6),
                             next((y["content"] for y in exported
                                   if y["id"] == x["superseded_by"]), None),
                             x["supersede_reason"]) for x in exported}
    assert before["The API listens on port 8080"][0] == "superseded"
    assert before["Deploys happen on Fridays"][0] == "disputed"

    # The same bank: every fact is already present; nothing reinforced, nothing added.
    out = ok(capsys, "import", str(dump), "--all-statuses")
    assert f"0 stored, 0 reinforced, {len(exported)} already present" in out
    again = [json.loads(x) for x in ok(capsys, "export").splitlines()]
    assert again == exported, "re-importing an export changed the bank"

    # A fresh bank: the same statuses, links, reasons and trust.
    out = ok(capsys, "import", str(dump), "--all-statuses", "--bank", "team")
    assert f"{len(exported)} stored" in out
    team = [json.loads(x) for x in ok(capsys, "export", "--bank", "team").splitlines()]
    after = {x["content"]: (x["status"], round(x["trust"], 6),
                            next((y["content"] for y in team
                                  if y["id"] == x["superseded_by"]), None),
                            x["supersede_reason"]) for x in team}
    # A write token restores trust only up to what an add of the origin gives (a writer cannot
    # raise trust by importing, docs/principles.md#explicit-trust: the confirmed pnpm fact,
    # 0.93, comes back at a user fact's 0.90); an admin's as exported.
    capped = {x["content"]: min(round(x["trust"], 6), TRUST.initial(x["origin"],
                                                                    x["tentative"]))
              for x in exported}
    assert after == {k: (v[0], capped[k], *v[2:]) for k, v in before.items()}
    assert capped["The team uses pnpm, never npm"] < before["The team uses pnpm, never npm"][1]
    assert all(t["questions"] == e["questions"] for t, e in
               zip(sorted(team, key=lambda x: x["content"]),
                   sorted(exported, key=lambda x: x["content"]), strict=True))
    # And into the fresh bank again: still no reinforcement.
    out = ok(capsys, "import", str(dump), "--all-statuses", "--bank", "team")
    assert f"0 stored, 0 reinforced, {len(exported)} already present" in out
    assert [json.loads(x) for x in ok(capsys, "export", "--bank", "team").splitlines()] == team
    # A plain import (active only) of the export into the same bank also changes nothing.
    out = ok(capsys, "import", str(dump))
    assert "0 reinforced" in out
    assert [json.loads(x) for x in ok(capsys, "export").splitlines()] == exported
    assert c["id"] in {x["id"] for x in exported}
    # Nothing written, nothing invalidated: the bank's version (recall's cache key) stays.
    import httpx

    line = json.dumps(to_import_item(exported[0]), ensure_ascii=False)
    versions = []
    for _ in range(2):
        r = httpx.post(f"{env.urls.ingest_url}/v1/facts/import", params={"existing": "skip"},
                       content=line + "\n", headers={"Authorization": f"Bearer {env.personal.rw}"})
        assert r.status_code == 201 and r.json()["present"] == 1, r.text
        versions.append(r.headers.get("X-Factbank-Version"))
    assert versions[0] is not None and versions[0] == versions[1]


# --- search, inject-preview, stats --------------------------------------------------------


def _seed(capsys) -> dict[str, int]:
    ids = {}
    ids["pnpm"] = ok_json(capsys, *ADD_PNPM)["fact"]["id"]
    ids["port"] = ok_json(capsys, "add", "The API listens on port 8080", "--category",
                          "environment", "--source", "deploy/api.yaml:4", "--quote",
                          "port: 8080", "--tag", "api", "--tag", "端口", "--tag",
                          "port")["fact"]["id"]
    return ids


def test_search_merges_banks_and_labels_results(env, capsys):
    login(capsys, env, team=True)
    ids = _seed(capsys)
    team = ok_json(capsys, "add", "Team CI runs on GitHub Actions", "--category", "project",
                   "--source-kind", "user", "--quote", "CI is on GitHub Actions", "--bank",
                   "team", "--tag", "ci", "--tag", "持续集成")["fact"]
    # Ranking quality is the recall service's own test; here: plumbing, merge and labels.
    data = ok_json(capsys, "search", "does the team use pnpm or npm")
    top = data["results"][0]
    assert top["fact"]["id"] == ids["pnpm"] and top["bank"] == "personal"
    assert top["fact"]["bank"] == "alice"  # the server's bank name stays on the fact
    data = ok_json(capsys, "search", "team CI runs on GitHub Actions", "--limit", "3")
    assert any(r["bank"] == "team" and r["fact"]["id"] == team["id"] for r in data["results"])
    assert len(data["results"]) <= 3
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)
    out = ok(capsys, "search", "does the team use pnpm or npm")
    assert "ID" in out and "BANK" in out and "pnpm" in out
    out = ok(capsys, "search", "zzzz qqqq xxxx nothing like this")
    assert out.strip() in ("no facts above the recall floor",) or "ID" in out


def test_search_via_superseded(env, capsys):
    login(capsys, env)
    old = _seed(capsys)["port"]
    (env.repo / "deploy" / "api.yaml").write_text("server:\n  port: 8081\n", "utf-8")
    new = ok_json(capsys, "supersede", str(old), "--reason", "moved to 8081", "--content",
                  "The API listens on port 8081", "--source", "deploy/api.yaml:2",
                  "--quote", "port: 8081")["fact"]["id"]
    data = ok_json(capsys, "search", "which port does the API listen on")
    hit = next(r for r in data["results"] if r["fact"]["id"] == new)
    if hit["via"] is not None:
        assert hit["via"]["superseded"] == old
    assert all(r["fact"]["id"] != old for r in data["results"])


def test_inject_preview_session_and_prompt(env, capsys):
    login(capsys, env, team=True)
    ids = _seed(capsys)
    data = ok_json(capsys, "inject-preview")
    assert ids["pnpm"] in data["facts"] and data["tokens"] > 0
    assert f"#{ids['pnpm']}" in data["text"]
    assert set(data["banks"]) == {"personal", "team"}
    code, out, err = run(capsys, "inject-preview")
    assert code == 0 and out.strip() == data["text"] and "tokens" in err
    data = ok_json(capsys, "inject-preview", "--prompt", "which port does the API listen on?")
    assert ids["port"] in data["facts"]


def test_stats(env, capsys):
    login(capsys, env, team=True)
    _seed(capsys)
    data = ok_json(capsys, "stats")
    assert set(data) == {"personal", "team"}
    out = ok(capsys, "stats")
    assert out.startswith("personal:") and "team:" in out


# --- failures are one line ----------------------------------------------------------------


def test_unreachable_service_is_one_line(env, capsys, tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setenv("FACTBANK_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("FACTBANK_TOKEN", env.personal.rw)
    code, _, err = run(capsys, "get", "1")
    assert code == 2 and "cannot reach ingest" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "factbank up" in err and "factbank login --url" in err  # what to do about it


def test_read_only_token_cannot_write(env, capsys):
    ok(capsys, "login", "--url", env.urls.ingest_url, "--recall-url", env.urls.recall_url,
       "--token", env.personal.ro)
    code, _, err = run(capsys, *ADD_PNPM)
    assert code == 2 and "403" in err and "write" in err


def test_library_error_carries_status_and_reasons(env):
    cfg = client_config.ClientConfig(url=env.urls.ingest_url, recall_url=env.urls.recall_url,
                                     tokens={"personal": env.personal.rw})
    with Client(cfg, agent="codex") as client, pytest.raises(FactbankError) as info:
        client.add({"content": "x", "category": "environment", "source": {"kind": "user"},
                    "quote": " "})
    assert info.value.status == 422 and info.value.reasons[0]["field"] == "quote"
    with Client(cfg, agent="codex") as client:
        out = client.add({"content": "Deploys go through ArgoCD", "category": "project",
                          "source": {"kind": "user"}, "quote": "we deploy with argo"})
    assert out["fact"]["created_by"]["agent"] == "codex"


# --- the newcomer's smaller items (item 7) ---------------------------------------


def _all_parsers(parser):
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_every_command_option_and_argument_has_help():
    import argparse

    from factbank_client.cli.main import build_parser

    missing = []
    for parser in _all_parsers(build_parser()):
        for action in parser._actions:
            if action.help is None and action.dest != "help" and not isinstance(
                    action, argparse._SubParsersAction):
                missing.append(f"{parser.prog}: {action.option_strings or action.dest}")
    assert not missing, missing
    up = next(p for p in _all_parsers(build_parser()) if p.prog == "factbank up")
    assert "readyz" in up.format_help() and "token" in up.format_help()


def test_help_lists_every_group_in_its_order():
    """The server and eval groups plug in from outside the client: same commands, same order."""
    from factbank_client.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == [
        "up", "status", "down", "migrate", "serve", "admin", "login", "add", "search", "get",
        "history", "questions", "confirm", "dispute", "delete", "supersede", "categories",
        "export", "import", "inject-preview", "stats", "mcp", "install", "uninstall", "eval",
        "bench", "timeline", "handoff", "import-history", "verify", "rules", "migrate-native",
        "code", "queue", "enrich", "dispatch", "dashboard", "doctor", "completion"]
    assert build_parser().epilog is None  # nothing is missing in the full install


def test_a_group_missing_a_third_party_module_is_skipped_one_of_ours_raises(monkeypatch):
    from importlib.metadata import EntryPoint

    from factbank_client.cli import main as cli_main

    real = list(cli_main.entry_points(group=cli_main.COMMANDS_GROUP))
    extra = EntryPoint("plots", "no_such_plotting_lib.cli:register", cli_main.COMMANDS_GROUP)
    monkeypatch.setattr(cli_main, "entry_points", lambda group: [*real, extra])
    parser = cli_main.build_parser()
    assert "the plots commands need pip install 'factbank[server]'" in parser.format_help()
    ours = EntryPoint("broken", "factbank_no_such_module:register", cli_main.COMMANDS_GROUP)
    monkeypatch.setattr(cli_main, "entry_points", lambda group: [*real, ours])
    with pytest.raises(ModuleNotFoundError, match="factbank_no_such_module"):
        cli_main.build_parser()


def test_bare_factbank_prints_help_and_a_typo_gets_did_you_mean(capsys):
    code, out, _ = run(capsys)
    assert code == 0 and "usage: factbank" in out and "search" in out
    with pytest.raises(SystemExit) as exc:
        main(["serch", "pnpm"])
    assert exc.value.code == 2
    assert "did you mean 'search'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["search", "x", "--mode", "lexicl"])
    assert "did you mean 'lexical'" in capsys.readouterr().err


def test_dispute_and_delete_require_a_reason_in_the_cli_too(capsys):
    for command in ("dispute", "delete"):
        with pytest.raises(SystemExit) as exc:
            main([command, "1"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "--reason" in err and "required" in err
        with pytest.raises(SystemExit):
            main([command, "--help"])
        usage = capsys.readouterr().out.split("\n\n")[0]
        assert "[--reason" not in usage and "--reason REASON" in usage  # not shown optional


def test_a_missing_file_source_says_no_such_file(env, capsys):
    login(capsys, env)
    code, _, err = run(capsys, "add", "The API listens on port 8080", "--category",
                       "environment", "--source", "deploy/nope.yaml:4", "--quote", "port: 8080",
                       "--tag", "api")
    assert code == 2 and "no such file: deploy/nope.yaml" in err
    assert "--source-kind is needed" not in err


def test_a_refused_token_says_what_to_do(env, capsys, monkeypatch):
    monkeypatch.setenv("FACTBANK_URL", env.urls.ingest_url)
    monkeypatch.setenv("FACTBANK_RECALL_URL", env.urls.recall_url)
    monkeypatch.setenv("FACTBANK_TOKEN", "fb_revoked_or_mistyped_token_000000")
    code, _, err = run(capsys, "search", "pnpm")
    assert code == 2 and "401" in err and "factbank login --token" in err
    assert "admin token issue" in err


def test_categories_auto_inject_column_tells_the_truth(env, capsys):
    login(capsys, env)
    out = ok(capsys, "categories")
    rows = {ln.split()[1]: ln for ln in out.splitlines()[1:] if ln.startswith("personal")}
    # preferences are injected for every project; decisions only for their project.
    assert " all " in rows["preferences"] and " project " in rows["decisions"]
    assert "only the current project's" in out
    # And it is what session start does: a project fact of a non-auto category is injected
    # (the old column said "no" for it).
    fact = ok_json(capsys, "add", "Releases are cut from main by CI", "--category", "decisions",
                   "--source-kind", "user", "--quote", "we cut releases from main in CI",
                   "--tag", "release")
    block = ok_json(capsys, "inject-preview")
    assert fact["fact"]["id"] in block["facts"]


def test_export_into_a_closed_pipe_ends_quietly(env, capsys, tmp_path):
    import subprocess
    import sys

    login(capsys, env)
    ok(capsys, *ADD_PNPM)
    proc = subprocess.Popen([sys.executable, "-m", "factbank_client.cli.main", "export"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "FACTBANK_CONFIG": str(env.config_path)})
    proc.stdout.close()  # `| head` that has already gone
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141


# --- doctor and --json on export ---------------------------------------------------


def test_doctor_passes_when_everything_is_in_place(env, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no harness on this PATH
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "FACTBANK_HOME"):
        monkeypatch.delenv(var, raising=False)
    login(capsys, env, team=True)
    (tmp_path / ".claude").mkdir()
    code, out, _ = run(capsys, "doctor", "--json")
    report = json.loads(out)
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert status["hooks claude"] == "fail" and code == 1, "Claude Code is here, no hooks"
    ok(capsys, "install", "all")
    report = ok_json(capsys, "doctor")
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert report["ok"] is True, report
    assert {k: status[k] for k in ("config", "ingest", "recall", "redis", "token personal",
                                    "token team", "hooks claude")} == dict.fromkeys(
        ("config", "ingest", "recall", "redis", "token personal", "token team",
         "hooks claude"), "ok")
    # A revoked (here: wrong) token is a failure with its fix.
    env.config_path.write_text(env.config_path.read_text().replace(env.team.rw, "fb_" + "x" * 30))
    code, out, _ = run(capsys, "doctor", "--json")
    team = next(c for c in json.loads(out)["checks"] if c["name"] == "token team")
    assert code == 1 and team["status"] == "fail" and "--bank team" in team["fix"]


def test_export_json(env, capsys, tmp_path):
    login(capsys, env)
    ok(capsys, *ADD_PNPM)
    facts = ok_json(capsys, "export")
    assert [f["content"] for f in facts] == ["The team uses pnpm, never npm"]
    out = tmp_path / "facts.jsonl"
    summary = ok_json(capsys, "export", "--out", str(out))
    assert summary == {"exported": 1, "path": str(out)}
    assert json.loads(out.read_text())["content"] == facts[0]["content"]
