"""The Pi extension's pure parts, run in node (through Pi's own TypeScript loader, jiti) and
compared with the Python client: the project key must be identical, or a fact saved from Pi
would never be injected into Claude Code/Codex in the same repository (and vice versa); the
minimal config reader must read what `factbank login` writes; a fact and an outcome read as
render.py writes them for MCP. The extension is loaded as `factbank install pi` writes it
(tool texts and constants filled in).

Skips when node or the harness install (tests/harness/npm.py) is missing; it never installs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from factbank_client import config as client_config
from factbank_client import render
from factbank_client.project import normalise_remote, project_key
from factbank_client.tools import texts
from factbank_common.inert import inert
from tests.conftest import git
from tests.unit.hostile_text import HOSTILE
from tests.unit.pi_ts import run_ts

REMOTES = [
    "git@github.com:Acme/Api.git",
    "https://github.com/acme/api",
    "https://github.com/acme/api.git/",
    "ssh://git@github.com/acme/api.git",
    "ssh://git@github.com:2222/acme/api.git",
    "https://user:pw@gitlab.example.com/group/sub/Repo.git",
    "git@gitlab.example.com:group/sub/repo",
    "file:///srv/git/project.git",
    "/srv/git/project.git",
    "../relative/Repo.git/",
    "C:/repos/thing.git",
    "  git@github.com:acme/spaces.git  ",
    "github.com:acme/scp-no-user.git",
    "https://github.com/acme/api?x=1",
    "",
]


def test_normalise_remote_matches_python() -> None:
    got = run_ts(f"result = {json.dumps(REMOTES)}.map((u) => m.normaliseRemote(u));")
    assert got == [normalise_remote(u) for u in REMOTES]


def make_repo(root: Path, name: str, config: str | None) -> Path:
    repo = root / name
    (repo / ".git").mkdir(parents=True)
    if config is not None:
        (repo / ".git" / "config").write_text(config)
    (repo / "src" / "deep").mkdir(parents=True)
    return repo


def test_project_key_matches_python(tmp_path: Path) -> None:
    cases = {
        "origin": '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:Acme/W.git\n'
                  '\tfetch = +refs/heads/*:refs/remotes/origin/*\n',
        "upstream-first": '[remote "upstream"]\n\turl = https://github.com/up/x\n'
                          '[remote "origin"]\n\tURL = https://github.com/me/X.git\n',
        "only-upstream": '[remote "upstream"]\n\turl = https://github.com/up/y.git\n',
        "no-remote": "[core]\n\tbare = false\n",
        "MixedCaseDir": None,
        "broken": "[core]\n\tbare\n[remote \"origin\"]\n\turl = git@h:a/b\n",
        "colon": '[remote "origin"]\n\turl: https://h.example/a/b\n',
    }
    dirs = []
    for name, config in cases.items():
        repo = make_repo(tmp_path, name, config)
        dirs += [repo, repo / "src" / "deep"]
    # a worktree-style .git file pointing at another git dir with a commondir
    main = make_repo(tmp_path, "main-repo", '[remote "origin"]\n\turl = git@github.com:a/wt\n')
    wt_git = main / ".git" / "worktrees" / "feature"
    wt_git.mkdir(parents=True)
    (wt_git / "commondir").write_text("../..\n")
    wt = tmp_path / "feature-wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {wt_git}\n")
    dirs += [wt, tmp_path]
    got = run_ts(f"result = {json.dumps([str(d) for d in dirs])}.map((d) => m.projectKey(d));")
    want = [project_key(d) for d in dirs]
    assert got == want
    assert "github.com/acme/w" in want and "mixedcasedir" in want and "broken" in want


def test_config_reader_reads_what_login_writes(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# my factbank\nteam_categories = ['decisions', \"people\"]\n")
    client_config.save_login("http://100.64.0.5:8701", "fb_personal_tok", path=path)
    client_config.save_login("http://100.64.0.5:8701", "fb_team_tok", "team", path=path)
    env = {"FACTBANK_CONFIG": str(path), "HOME": str(tmp_path)}
    got = run_ts(f"const c = m.loadConfig({json.dumps(env)}); "
                 "result = {...c, banks: m.banks(c), w1: m.writeBank(c, 'decisions'), "
                 "w2: m.writeBank(c, 'project')};")
    for key in ("FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN", "FACTBANK_TEAM_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    want = client_config.load(path)
    assert got == {"url": want.url, "recallUrl": want.recall_url, "tokens": want.tokens,
                   "teamCategories": want.team_categories, "banks": want.banks,
                   "w1": want.write_bank("decisions"), "w2": want.write_bank("project")}
    assert got["recallUrl"] == "http://100.64.0.5:8702"


def test_config_env_overrides(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "FACTBANK_URL": "http://h:9000/", "FACTBANK_TOKEN": "t1",
           "FACTBANK_TEAM_TOKEN": "t2"}
    got = run_ts(f"result = m.loadConfig({json.dumps(env)});")
    assert got == {"url": "http://h:9000", "recallUrl": "http://h:9001",
                   "tokens": {"personal": "t1", "team": "t2"}, "teamCategories": []}


# --- writer questions (docs/principles.md#the-writer-asks-the-questions)
# ----------------------------------------------------------

QUESTIONS = ["which package manager do we use?", "装依赖用 npm 还是 pnpm？"]
PARAMS = {"content": "The team uses pnpm", "category": "preferences", "source_kind": "user",
          "source_location": "", "quote": "we use pnpm", "tags": ["pnpm"], "project": ""}


def test_pi_tools_ask_for_bilingual_questions_and_say_why() -> None:
    got = run_ts("const tools = {}; m.default({on() {}, registerTool(t) { tools[t.name] = t; }});"
                 "result = tools;")
    for name in ("factbank_add", "factbank_supersede"):
        props = got[name]["parameters"]["properties"]
        assert props["questions"]["type"] == "array" and props["questions"]["maxItems"] == 6
        for must in ("2-4", "BOTH English and Chinese", "everyday words", "not the fact's own"):
            assert must in props["questions"]["description"], (name, must)
        assert "questions" not in got[name]["parameters"]["required"]
    add = got["factbank_add"]["description"]
    for must in ("`questions`: 2-4 questions", "BOTH English and Chinese whatever the fact's "
                 "language", "NOT the fact's own wording", "0.60 to 0.94", "0.20 to 0.92",
                 "use `factbank_supersede` instead"):
        assert must in add, must
    assert "2-4 questions" in got["factbank_supersede"]["description"]
    search = got["factbank_search"]["description"]
    # The match score explained again (Pi's copy of this text had lost it).
    assert "a match of 0.50 or more is a confident one" in search and "below the gate" in search


def test_pi_fact_carries_questions_and_the_answer_nudges_without_them(tmp_path: Path) -> None:
    got = run_ts(f"""
        const p = {json.dumps(PARAMS)};
        const fact = (extra) => m.buildFact({{...p, ...extra}}, {json.dumps(str(tmp_path))});
        const stored = (questions) =>
          ({{status: "stored", fact: {{id: 3, trust: 0.9, questions}}}});
        result = {{with: fact({{questions: {json.dumps(QUESTIONS)}}}), without: fact({{}}),
                  empty: fact({{questions: []}}),
                  nudge: m.outcomeText(stored([]), "personal"),
                  quiet: m.outcomeText(stored({json.dumps(QUESTIONS)}), "personal")}};
    """)
    assert got["with"]["questions"] == QUESTIONS
    assert "questions" not in got["without"] and "questions" not in got["empty"]
    assert "It has no questions" in got["nudge"] and "factbank_add again" in got["nudge"]
    assert got["quiet"] == "Stored fact #3 in personal (trust 0.90)."


def test_pi_search_lines_show_the_matched_question_and_companions() -> None:
    fact = {"id": 1, "content": "The team uses pnpm", "trust": 0.9, "effective_trust": 0.9,
            "status": "active", "source": {"kind": "user", "location": ""}, "tags": ["pnpm"]}
    hits = [{"fact": fact, "bank": "personal", "match": "question: " + QUESTIONS[1]},
            {"fact": {**fact, "id": 2}, "bank": "team", "match": "content", "companion": True},
            {"fact": {**fact, "id": 3}, "bank": "team", "match": None},
            {"fact": {**fact, "id": 4}, "bank": "team", "relevance": 0.487, "companion": True}]
    got = run_ts(f"result = {json.dumps(hits)}.map((h) => m.hitLines(h));")
    assert got[0] == ["#1 [personal, trust 0.90] The team uses pnpm (source: user; tags: pnpm)",
                      f"    (matched its question: {json.dumps(QUESTIONS[1], ensure_ascii=False)})"]
    assert got[1] == ["#2 [team, trust 0.90, below the gate] The team uses pnpm "
                      "(source: user; tags: pnpm)"]
    assert len(got[2]) == 1 and "below the gate" not in got[2][0]
    assert got[3] == ["#4 [team, trust 0.90, match 0.49, below the gate] The team uses pnpm "
                      "(source: user; tags: pnpm)"]


# --- the same text as the MCP server (factbank_client/render.py) ------------------------------

FACTS = [
    {"id": 7, "content": "The API listens on 9090", "trust": 0.5, "effective_trust": 0.43,
     "status": "disputed", "tentative": True, "tags": ["api", "端口"],
     "source": {"kind": "file", "location": "deploy/api.yaml:4"}, "questions": []},
    {"id": 8, "content": "Deploys go through ArgoCD", "trust": 0.9, "status": "active",
     "source": {"kind": "user", "location": ""}, "tags": [], "questions": ["how?"]},
]
OUTCOMES = [
    {"status": "stored", "bank": "personal", "fact": FACTS[0], "possible_duplicate_of": [2, 5],
     "redacted": [{"kind": "aws-key", "field": "content"}, {"field": "quote"}], "note": "x"},
    {"status": "reinforced", "bank": "team", "fact": FACTS[1], "note": "same claim"},
    {"status": "stored", "bank": "team", "fact": FACTS[1]},
    # where it went and who reads it, and a team token saved as "personal".
    {"status": "stored", "bank": "personal", "fact": FACTS[1],
     "visible_to": {"bank": "acme", "kind": "team", "members": 3,
                    "names": ["alice", "bob", "carol"]}},
    {"status": "stored", "bank": "personal", "fact": FACTS[1],
     "visible_to": {"bank": "alice", "kind": "personal", "members": 1, "names": ["alice"]}},
    {"status": "stored", "bank": "team", "fact": FACTS[1],
     "visible_to": {"bank": "acme", "kind": "team", "members": 12,
                    "names": [f"m{i}" for i in range(10)]}},
]


def test_pi_says_why_a_fact_is_not_current_as_render_does() -> None:
    """`get` of a stale fact says why, in both the MCP text and Pi's."""
    stale = {**FACTS[0], "status": "stale", "stale": {
        "reason": "the quote is gone from deploy/api.yaml:4", "since": "2026-12-01T10:00:00Z",
        "context": "3:   host: 0.0.0.0\n4:   port: 9090\n"}}
    review = {**FACTS[1], "review": {"reason": "fact #3 it cites was superseded", "cause": 3,
                                     "since": "2026-12-01T11:00:00Z"}}
    cases = [stale, review, FACTS[1]]
    got = run_ts(f"result = {json.dumps(cases)}.map((f) => m.whyNotCurrent(f));")
    assert got == [render.why_not_current(f) for f in cases]
    assert got[0][0] == ("stale since 2026-12-01 10:00: the quote is gone from "
                         "deploy/api.yaml:4") and got[0][2] == "    4:   port: 9090"
    assert got[2] == []


def test_pi_writes_facts_and_outcomes_as_render_does_for_mcp() -> None:
    cases = [(f, b, m, c) for f in FACTS for b in (None, "team") for m in (None, 0.5049)
             for c in (False, True)]
    got = run_ts(f"""result = {{
        lines: {json.dumps(cases)}.map(([fact, bank, match, companion]) =>
          m.factLine(fact, bank ?? undefined, match ?? undefined, companion)),
        outcomes: {json.dumps(OUTCOMES)}.map((o) => m.outcomeText(o, o.bank))}};""")
    assert got["lines"] == [render.fact_line(f, b, m, c) for f, b, m, c in cases]
    pi = texts("pi")
    assert got["outcomes"] == [render.outcome_text(o, pi.name, pi.messages["no_questions"])
                               for o in OUTCOMES]


def test_pi_fingerprint_matches_the_python_client(tmp_path: Path) -> None:
    """Pi's add computes the same fingerprint (and repo-relative location) as
    factbank_client/staleness/fingerprint.py, for a committed file, a dirty one and a commit
    source."""
    from factbank_client.client import new_fact

    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    (repo / "deploy" / "api.yaml").write_text("server:\n  port: 8080   \n  tls: true\n")
    (repo / "notes.md").write_text("第一行\n缓存在 上海\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        git(repo, *args)
    (repo / "notes.md").write_text("第一行\n缓存在 上海\n新的一行\n")
    head = git(repo, "rev-parse", "HEAD")
    cases = [("file", str(repo / "deploy" / "api.yaml") + ":2", "port: 8080"),
             ("file", "deploy/api.yaml", "port:\n 8080 tls: true"),
             ("file", "notes.md:2", "缓存在 上海"),
             ("commit", head[:8], "init")]
    got = run_ts(f"""
        result = {json.dumps(cases)}.map(([k, loc, q]) => m.buildFact(
          {{content: "c", category: "project", source_kind: k, source_location: loc,
           quote: q, tags: ["t"]}}, {json.dumps(str(repo))}));
    """)
    for (kind, loc, quote), ts in zip(cases, got, strict=True):
        py = new_fact("c", "project", kind, loc, quote, tags=["t"], cwd=repo)
        assert ts["fingerprint"] == py["fingerprint"], (loc, ts, py)
        assert ts["source"] == py["source"]
    assert got[2]["fingerprint"]["dirty"] is True and got[0]["fingerprint"]["dirty"] is False


def test_pi_symbol_source_is_the_python_clients_and_a_bad_one_is_refused(tmp_path) -> None:
    """A symbol source (`path::Qualified.name`) saved from Pi carries the Python client's
    location and fingerprint (one digest: Pi runs `python -m factbank_client.code.check`);
    a symbol that is not there is the tool's error, naming the field."""
    from factbank_client.client import new_fact

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "code" / "retry.go"
    (repo / "src" / "retry.go").write_text(fixture.read_text())
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        git(repo, *args)
    loc, quote = "src/retry.go::Policy.Backoff", "d := p.Base << n"
    cwd, q = json.dumps(str(repo)), json.dumps(quote)
    got = run_ts(f"""
        const p = {{content: "c", category: "project", source_kind: "file", quote: {q},
                   tags: ["t"]}};
        const build = (loc) => m.buildFact({{...p, source_location: loc}}, {cwd});
        let refused = "";
        try {{ build("src/retry.go::Policy.Backof"); }}
        catch (e) {{ refused = String(e.message); }}
        result = {{ok: build({json.dumps(loc)}), refused}};
    """)
    py = new_fact("c", "project", "file", loc, quote, tags=["t"], cwd=repo)
    assert got["ok"]["fingerprint"] == py["fingerprint"] and got["ok"]["source"] == py["source"]
    assert py["fingerprint"]["symbol"] == "Policy.Backoff"
    assert got["refused"].startswith("refused: source: symbol Policy.Backof is not defined")


def test_pi_session_start_starts_verify_in_the_background(tmp_path: Path) -> None:
    """the installed extension runs the installer's verify command, detached, in a
    repository; outside one, or with FACTBANK_VERIFY=0, it does not."""
    from factbank_client.install.common import pi_extension_text

    assert '"verifyCommand"' in pi_extension_text()
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    out = tmp_path / "ran.txt"
    fake = tmp_path / "fake-python"
    fake.write_text(f'#!/bin/sh\necho "$PWD $*" >> {out}\n')
    fake.chmod(0o755)
    got = run_ts(f"""
        m.SHARED.verifyCommand = [{json.dumps(str(fake))}, "-m", "x", "verify", "--quiet"];
        process.env.XDG_CACHE_HOME = {json.dumps(str(tmp_path / "cache"))};
        const a = m.startVerify({json.dumps(str(repo))});
        const b = m.startVerify({json.dumps(str(tmp_path))});
        process.env.FACTBANK_VERIFY = "0";
        const c = m.startVerify({json.dumps(str(repo))});
        await new Promise((r) => setTimeout(r, 300));
        result = [a, b, c];
    """)
    assert got == [True, False, False]
    deadline = time.monotonic() + 20
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert out.read_text().strip() == f"{repo} -m x verify --quiet"


def test_pi_add_never_reads_a_hostile_location(tmp_path: Path) -> None:
    """Pi's add reads the cited file only as safefs does (its `readInside`): the
    hostile table (tests/unit/hostile_fs.py) gives no fingerprint and nothing of the file, and
    a file inside the repository (through the root's own link too) still gets one."""
    from factbank_client.client import new_fact
    from tests.unit.hostile_fs import (
        HOSTILE_IDS,
        POSITIVE_IDS,
        USER_CHOSEN_OK,
        hostile,
        layout,
        positive,
        secret_free,
    )

    lay = layout(tmp_path)  # "~/notes.txt" is refused whatever $HOME is
    bad = [hostile(lay)[c] for c in HOSTILE_IDS if c not in USER_CHOSEN_OK]
    good = [positive(lay)[c] for c in POSITIVE_IDS]
    roots = [str(lay.repo), str(lay.tmp / "elsewhere" / "repolink")]
    got = run_ts(f"""
        const fact = (loc, q, cwd) => m.buildFact({{content: "c", category: "project",
          source_kind: "file", source_location: loc, quote: q, tags: []}}, cwd);
        result = {{
          bad: {json.dumps(bad)}.map((loc) => fact(loc, "the private note",
                                                   {json.dumps(roots[0])})),
          good: {json.dumps(roots)}.map((r) => {json.dumps(good)}.map(
            (loc) => fact(loc, "The API listens on port 8443", r))),
        }};
    """)
    for loc, ts in zip(bad, got["bad"], strict=True):
        assert "fingerprint" not in ts and secret_free(ts), (loc, ts)
    for root, row in zip(roots, got["good"], strict=True):
        for loc, ts in zip(good, row, strict=True):
            py = new_fact("c", "project", "file", loc, "The API listens on port 8443",
                          tags=[], cwd=Path(root))
            assert ts["fingerprint"] == py["fingerprint"], (root, loc, ts, py)
            assert ts["source"]["location"] == "docs/ok.txt:2"


def test_pi_renders_bank_text_inert_as_the_python_client_does() -> None:
    """the extension's `inert` is factbank_common/inert.py's, escape for escape,
    and its fact lines carry no line, escape or invisible character of a bank's own."""
    texts_ = [t[:4100] for t in HOSTILE.values()]  # past the limit; a command line is short
    facts = [{**FACTS[0], "content": t, "tags": [t], "status": "active",
              "source": {"kind": "file", "location": t}} for t in texts_]
    got = run_ts(f"""const texts = {json.dumps(texts_)};
        result = {{ inert: texts.map((t) => m.inert(t)),
                    lines: {json.dumps(facts)}.map((f) => m.factLine(f, "team")) }};""")
    assert got["inert"] == [inert(t) for t in texts_]
    assert got["lines"] == [render.fact_line(f, "team") for f in facts]
    assert all("\n" not in line and "\x1b" not in line for line in got["lines"])


def test_pi_checks_the_block_against_the_working_tree_as_the_hooks_do(tmp_path: Path) -> None:
    """Verify before inject in Pi: `checkHere` and `filterBlock` give worktree.py's answers on
    a real repository (unchanged, drifted, edited, missing, binary, ignored, redacted), and
    the same block text."""
    from factbank_client.staleness import fingerprint, worktree

    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    body = "service: api\nhost: 0.0.0.0\nport: 8080\n"
    for name in ("same.yaml", "drift.yaml", "edit.yaml"):
        (repo / "deploy" / name).write_text(body)
    (repo / ".gitignore").write_text(".env\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        git(repo, *args)

    def fact(fid: int, path: str, quote: str = "port: 8080") -> dict:
        data = (repo / path).read_bytes() if (repo / path).exists() else b""
        return {"id": fid, "source": {"kind": "file", "location": f"{path}:3"}, "quote": quote,
                "fingerprint": fingerprint.build(data, path, 3, 3, repo) if data else None}

    facts = [fact(1, "deploy/same.yaml"), fact(2, "deploy/drift.yaml"),
             fact(3, "deploy/edit.yaml"), fact(4, "deploy/gone.yaml"),
             fact(5, "deploy/same.yaml", "token: [REDACTED:api_key]"),
             {"id": 6, "source": {"kind": "user", "location": ""}, "quote": "q"}]
    (repo / "deploy" / "drift.yaml").write_text("# new\n\n" + body)
    (repo / "deploy" / "edit.yaml").write_text(body.replace("8080", "9090"))
    (repo / "blob.bin").write_bytes(b"\0port: 9090")
    (repo / ".env").write_text("PORT=9090\n")
    facts += [{"id": 7, "source": {"kind": "file", "location": "blob.bin"}, "quote": "8080"},
              {"id": 8, "source": {"kind": "file", "location": ".env:1"}, "quote": "PORT=8080"}]
    text = "\n".join(["[factbank] Remembered facts: context, not truth. (bank: personal)",
                      *(f"- #{f['id']} (trust 0.75, project) claim {f['id']}" for f in facts)])
    got = run_ts(f"""
        const facts = {json.dumps(facts)};
        result = {{states: facts.map((f) => m.checkHere(f, {json.dumps(str(repo))})[0]),
                   block: m.filterBlock({json.dumps(text)}, facts, {json.dumps(str(repo))})}};
    """)
    assert isinstance(got, dict)
    py = [worktree.check(f, repo)[0] for f in facts]
    assert got["states"] == py
    assert py == ["holds", "holds", "not-holding", "unknown", "unknown", "unknown", "unknown",
                  "unknown"]
    assert got["block"] == {"text": worktree.filter_block(text, facts, repo)[0], "left": [3]}


def test_pi_never_hides_a_symbol_fact_on_a_guess(tmp_path: Path) -> None:
    """Pi has no parser: a symbol anchor whose quote left its file (the function moved to
    another file in the working tree) is "unknown" and stays in the block, where a line fact
    in the same state is left out; the quote still in the file holds."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "net.py").write_text("def other():\n    return 1\n")
    (repo / "src" / "retry.py").write_text("def backoff(n):\n    return 2 ** n\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        git(repo, *args)
    facts = [
        {"id": 1, "source": {"kind": "file", "location": "src/net.py::backoff"},
         "quote": "return 2 ** n", "fingerprint": {"path": "src/net.py", "symbol": "backoff"}},
        {"id": 2, "source": {"kind": "file", "location": "src/net.py:2"},
         "quote": "return 2 ** n", "fingerprint": {"path": "src/net.py"}},
        {"id": 3, "source": {"kind": "file", "location": "src/retry.py::backoff"},
         "quote": "return 2 ** n", "fingerprint": {"path": "src/retry.py", "symbol": "backoff"}},
    ]
    got = run_ts(f"""
        const facts = {json.dumps(facts)};
        result = facts.map((f) => m.checkHere(f, {json.dumps(str(repo))})[0]);
    """)
    assert got == ["unknown", "not-holding", "holds"]
