"""Writer questions in the light client, without the services: a fake bank behind
httpx.MockTransport records what the CLI, the library and the MCP server send, and answers
search with hits that carry `match` and `companion` as the recall service does."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx
import pytest
from mcp import Client as McpClient

from factbank_client import config as client_config
from factbank_client import mcp_server
from factbank_client.cli import common as cli_common
from factbank_client.cli.main import main
from factbank_client.client import Client

QUESTIONS = ["which package manager do we use?", "装依赖用 npm 还是 pnpm？"]


def fact(fid: int, **kw) -> dict:
    base = {"id": fid, "bank": "alice", "content": "The team uses pnpm, never npm",
            "category": "preferences", "tags": ["pnpm"], "questions": [],
            "source": {"kind": "user", "location": ""}, "quote": "we use pnpm",
            "project": None, "origin": "user", "tentative": False, "trust": 0.9,
            "effective_trust": 0.9, "status": "active", "superseded_by": None,
            "supersede_reason": None, "created_by": {"member": "alice", "agent": "cli"},
            "created_at": "2026-12-01T10:00:00Z", "confirmed_at": "2026-12-01T10:00:00Z"}
    return {**base, **kw}


@dataclass
class FakeBank:
    """Just enough of ingest and recall: add, supersede, get, PATCH and a canned search."""

    facts: dict[int, dict] = field(default_factory=dict)
    sent: list[tuple[str, str, dict | None]] = field(default_factory=list)
    hits: list[dict] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.sent.append((request.method, path, body))
        if request.method == "POST" and path in ("/v1/facts", "/v1/facts/supersede"):
            new = body["fact"] if path.endswith("supersede") else body
            fid = len(self.facts) + 1
            self.facts[fid] = fact(fid, content=new["content"],
                                   questions=new.get("questions") or [])
            return httpx.Response(200, json={"status": "stored", "fact": self.facts[fid]})
        if path.startswith("/v1/facts/"):
            fid = int(path.rsplit("/", 1)[1])
            if fid not in self.facts:
                return httpx.Response(404, json={"detail": "fact not found"})
            if request.method == "PATCH":
                self.facts[fid] = {**self.facts[fid], **body}
                return httpx.Response(200, json=self.facts[fid])
            return httpx.Response(200, json={"fact": self.facts[fid], "events": [],
                                             "supersedes": [], "successors": [],
                                             "current": self.facts[fid]})
        if path == "/v1/search":
            return httpx.Response(200, json={"results": self.hits, "degraded": None})
        return httpx.Response(404, json={"detail": f"no route {path}"})

    def client(self) -> Client:
        cfg = client_config.ClientConfig(url="http://ingest", recall_url="http://recall",
                                         tokens={"personal": "fb_test"})
        return Client(cfg, http=httpx.Client(transport=httpx.MockTransport(self.handle)))

    def posted(self) -> dict:
        return next(b for m, p, b in reversed(self.sent) if m == "POST" and p.startswith(
            "/v1/facts"))


def hit(f: dict, *, relevance: float, match: str | None, companion: bool = False) -> dict:
    return {"fact": f, "score": relevance, "relevance": relevance, "match": match,
            "companion": companion, "via": None}


@pytest.fixture
def bank(monkeypatch, tmp_path) -> FakeBank:
    fake = FakeBank()
    monkeypatch.setattr(cli_common, "client", fake.client)
    monkeypatch.chdir(tmp_path)
    return fake


def cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, (argv, out, err)
    return out


# --- the library ----------------------------------------------------------------------------


def test_add_questions_patches_old_plus_new(bank: FakeBank):
    bank.facts[1] = fact(1, questions=[QUESTIONS[0]])
    with bank.client() as client:
        out = client.add_questions(1, ["Which package manager do we use", QUESTIONS[1]])
    assert out["questions"] == QUESTIONS and out["bank_label"] == "personal"
    method, path, body = bank.sent[-1]
    assert (method, path, body) == ("PATCH", "/v1/facts/1", {"questions": QUESTIONS})
    with bank.client() as client:
        client.add_questions(1, [], remove=[QUESTIONS[0]])
    assert bank.facts[1]["questions"] == [QUESTIONS[1]]


# --- the CLI --------------------------------------------------------------------------------


def test_cli_add_sends_repeatable_questions(bank: FakeBank, capsys):
    cli(capsys, "add", "The team uses pnpm, never npm", "--category", "preferences",
        "--source-kind", "user", "--quote", "we use pnpm", "--tag", "pnpm", "--global",
        "--question", QUESTIONS[0], "--question", QUESTIONS[1])
    assert bank.posted()["questions"] == QUESTIONS
    cli(capsys, "add", "Builds use make", "--category", "project", "--source-kind", "user",
        "--quote", "we build with make", "--global")
    assert "questions" not in bank.posted()


def test_cli_add_help_asks_for_bilingual_questions(capsys):
    with pytest.raises(SystemExit):
        main(["add", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for must in ("--question", "2-4", "English AND Chinese", "not the fact's own wording",
                 "0.60 to 0.94", "0.20 to 0.92"):
        assert must in text, must


def test_cli_supersede_keeps_or_replaces_the_questions(bank: FakeBank, capsys):
    bank.facts[1] = fact(1, questions=QUESTIONS)
    cli(capsys, "supersede", "1", "--reason", "moved", "--content", "The team uses bun",
        "--source-kind", "user", "--quote", "we moved to bun")
    assert bank.posted()["fact"]["questions"] == QUESTIONS  # defaults from the old fact
    cli(capsys, "supersede", "1", "--reason", "moved", "--content", "The team uses bun",
        "--source-kind", "user", "--quote", "we moved to bun", "--question", "bun or pnpm?")
    assert bank.posted()["fact"]["questions"] == ["bun or pnpm?"]


@pytest.mark.parametrize("argv", [
    ("supersede", "The team uses bun", "1", "2", "--reason", "moved"),  # CONTENT first, as add
    ("supersede", "--reason", "moved", "The team uses bun", "1", "2"),
    ("supersede", "1", "2", "--reason", "moved", "--content", "The team uses bun"),  # older
])
def test_cli_supersede_takes_content_like_add_and_the_older_option(bank: FakeBank, capsys, argv):
    """Once `add CONTENT` but `supersede --content`. The claim is positional in both;
    --content stays accepted so scripts written before keep working."""
    bank.facts[1], bank.facts[2] = fact(1), fact(2)
    cli(capsys, *argv, "--source-kind", "user", "--quote", "we moved to bun")
    method, path, body = bank.sent[-1]
    assert (method, path) == ("POST", "/v1/facts/supersede")
    assert body["fact"]["content"] == "The team uses bun" and body["replaces"] == [1, 2]


@pytest.mark.parametrize("argv, words", [
    (("supersede", "1", "--reason", "r"), "give the ids"),
    (("supersede", "--reason", "r"), "give the new claim"),
    (("supersede", "claim", "x1", "--reason", "r"), "'x1' is not a fact id"),
])
def test_cli_supersede_says_what_is_missing(bank: FakeBank, capsys, argv, words):
    assert main([*argv, "--source-kind", "user", "--quote", "q"]) == 2
    assert words in capsys.readouterr().err and not bank.sent


def test_cli_questions_lists_adds_and_removes(bank: FakeBank, capsys):
    bank.facts[1] = fact(1)
    out = cli(capsys, "questions", "1")
    assert "has 0 questions" in out and "factbank questions 1 --add" in out
    out = cli(capsys, "questions", "1", "--add", QUESTIONS[0], "--add", QUESTIONS[1])
    assert "now has 2 questions" in out and QUESTIONS[1] in out
    assert bank.facts[1]["questions"] == QUESTIONS
    out = cli(capsys, "questions", "1", "--add", "npm or pnpm?", "--remove", QUESTIONS[0])
    assert bank.facts[1]["questions"] == [QUESTIONS[1], "npm or pnpm?"]
    data = json.loads(cli(capsys, "questions", "1", "--json"))
    assert data["questions"] == [QUESTIONS[1], "npm or pnpm?"]
    out = cli(capsys, "get", "1")
    assert f"questions: {QUESTIONS[1]} | npm or pnpm?" in out


def test_cli_search_shows_the_matched_question_and_companions(bank: FakeBank, capsys):
    bank.hits = [hit(fact(1), relevance=0.8, match="question: " + QUESTIONS[1]),
                 hit(fact(2, content="Builds use make"), relevance=0.45, match="content",
                     companion=True)]
    out = cli(capsys, "search", "用什么包管理器", "--related")
    header, first, second = out.splitlines()
    assert "MATCHED QUESTION" in header
    assert first.rstrip().endswith(QUESTIONS[1]) and "below the gate" not in first
    assert "Builds use make (below the gate)" in second and QUESTIONS[1] not in second
    # Without --related the companion is not a hit: left out.
    header, first = cli(capsys, "search", "用什么包管理器").splitlines()
    assert first.rstrip().endswith(QUESTIONS[1])
    bank.hits = [hit(fact(1), relevance=0.8, match="content")]
    out = cli(capsys, "search", "pnpm")
    assert "MATCHED QUESTION" not in out and "below the gate" not in out


# --- the MCP server -------------------------------------------------------------------------


def server_for(bank: FakeBank):
    client = bank.client()
    return mcp_server.build_server(lambda _ctx: client, local_files=False)


ADD = {"content": "The team uses pnpm, never npm", "category": "preferences",
       "source_kind": "user", "source_location": "", "quote": "we use pnpm",
       "origin": "user", "tags": ["pnpm", "包管理器"], "project": ""}


async def tool(client: McpClient, name: str, **arguments) -> str:
    result = await client.call_tool(name, arguments)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, text
    return text


async def test_mcp_add_and_supersede_ask_for_questions_and_say_why(bank: FakeBank):
    async with McpClient(server_for(bank)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("add", "supersede"):
        prop = tools[name].input_schema["properties"]["questions"]
        assert prop["type"] == "array" and prop["maxItems"] == 6
        assert "questions" not in tools[name].input_schema["required"]  # old callers work
        for must in ("2-4", "BOTH English and Chinese", "everyday words", "not the fact's own"):
            assert must in prop["description"], (name, must)
    add = " ".join((tools["add"].description or "").split())
    for must in ("`questions`", "BOTH English and Chinese whatever the fact's language",
                 "NOT the fact's own wording", "0.60 to 0.94", "0.20 to 0.92"):
        assert must in add, must
    assert "2-4 questions" in (tools["supersede"].description or "")
    assert "below the gate" in (tools["search"].description or "")


async def test_mcp_add_sends_questions_and_nudges_when_there_are_none(bank: FakeBank):
    async with McpClient(server_for(bank)) as client:
        out = await tool(client, "add", **ADD, questions=QUESTIONS)
        assert bank.posted()["questions"] == QUESTIONS
        assert out.startswith("Stored fact #1") and "no questions" not in out
        out = await tool(client, "add", **ADD)
        assert "questions" not in bank.posted()
        assert "It has no questions" in out and "a repeat adds them" in out
        too_many = await client.call_tool("add", {**ADD, "questions": ["q"] * 7})
        assert too_many.is_error

        out = await tool(client, "supersede", replaces=[1], reason="moved", **ADD,
                         questions=["bun or pnpm?"])
        assert bank.posted()["fact"]["questions"] == ["bun or pnpm?"]

        out = await tool(client, "get", id=1)
        assert f"questions: {QUESTIONS[0]} | {QUESTIONS[1]}" in out


async def test_mcp_search_shows_the_matched_question_and_companions(bank: FakeBank):
    bank.hits = [hit(fact(1), relevance=0.8, match="question: " + QUESTIONS[1]),
                 hit(fact(2, content="Builds use make"), relevance=0.45, match=None,
                     companion=True)]
    async with McpClient(server_for(bank)) as client:
        out = await tool(client, "search", query="用什么包管理器", project="")
    lines = out.splitlines()
    assert lines[0].startswith("#1 [personal, trust 0.90, match 0.80]")
    assert lines[1] == f"    (matched its question: {QUESTIONS[1]!r})"
    assert lines[2].startswith("#2 [personal, trust 0.90, match 0.45, below the gate]")
    assert len(lines) == 3
