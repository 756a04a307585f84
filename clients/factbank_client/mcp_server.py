"""The MCP server: factbank's tools for agents that speak MCP (Claude Code, Codex, Pi).

Two ways to run it, both thin skins over `Client`:

- stdio (`factbank mcp --agent claude-code`): one process per agent, started by the agent on
  its machine, using the client config (every configured bank). The agent name goes out as
  `X-Factbank-Agent`, so each write records which agent made it.
- streamable HTTP, stateless (`factbank mcp --http --port P`): one shared server; every request
  carries `Authorization: Bearer <factbank token>`, which is checked against the services (a
  wrong or missing token is a 401 before any tool runs) and forwarded on every call, so the
  server holds no credentials of its own and each caller only ever reaches its own bank.

The tool descriptions are the only manual the agent reads, so they say WHEN to use each tool,
not just what it does (principles 14 and 15: the writer is an LLM; ask it for tags that
bridge languages and aliases, and for the questions a later teammate would ask).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from factbank_client import config as client_config
from factbank_client import render
from factbank_client.client import (
    AGENT_HEADER,
    DEFAULT_TIMEOUT,
    Client,
    FactbankError,
    new_fact,
)
from factbank_client.project import project_key
from factbank_client.schema import Origin, SourceKind

log = logging.getLogger("factbank.mcp")

INSTRUCTIONS = """\
factbank is a shared memory of verified facts, used by all your user's agents on all their \
machines (and, with a team bank, by teammates). Facts injected into your context show \
`#id` and trust; confirm, dispute or supersede them by that id.

- Before assuming how this user or project does something (tools, hosts, ports, commands, \
conventions, past decisions, known errors), call `search`.
- When you learn something durable and checkable, call `add` AT ONCE: one atomic fact, an \
honest origin, the real source and a verbatim quote from it, tags naming its topic, the \
systems involved and their other names in both Chinese and English, and 2-4 questions a later \
teammate would ask whose answer is this fact, in English AND Chinese, in everyday words.
- When a fact you used turned out right, `confirm` it; wrong, `dispute` it; replaced by a \
newer truth, `supersede` it (history is kept).
- Never store secrets, credentials, tokens or personal data, and never whole conversations.\
"""

ADD_DESCRIPTION = """\
Save ONE durable fact you just learned, right away (do not wait for the end of the task).

Use it for things worth knowing in a later session or on another machine: the user's \
preferences and conventions ("uses pnpm, never npm"), environment facts (hosts, ports, paths), \
project commands and layout, decisions with their reason, and gotchas (error -> cause -> fix).
Do NOT use it for: guesses, task progress, things true only for this session, whole \
conversations or logs, or anything secret (passwords, tokens, keys, personal data).

Rules: one atomic claim per call (split compound facts); `quote` is copied verbatim from the \
source (for a file source it is checked against the file); `origin` is honest: "user" only if \
the user said it, "verified" only if you read it in a file/URL/command output yourself, else \
"inferred"; set `tentative` when unsure. `tags`: 3-8 short tags naming the topic, the systems \
involved and their aliases or generic words, in BOTH Chinese and English (e.g. ["postgres", \
"数据库", "database", "backup", "备份"]) - they are how a later search in either language \
finds this fact. `questions`: 2-4 questions a later teammate or agent would type whose answer \
is this fact, in BOTH English and Chinese whatever the fact's language, in everyday words and \
aliases, NOT the fact's own wording (e.g. for "Backups run pg_dump nightly to s3://acme-bak": \
["how are the database backups made?", "数据库备份存在哪里？"]). Why: each question is \
stored as an extra vector of the fact, and a search matches the closest one; measured on \
realistic zh/en agent facts, this took top-5 recall from 0.60 to 0.94, and across languages \
from 0.20 to 0.92.
If a fact in memory is wrong or outdated, use `supersede` instead of adding a contradiction. \
If the answer says the new fact is similar to existing ones, check them: if they no longer \
hold, supersede them (include the new fact's id in `replaces` too, to keep one current copy).\
"""

SEARCH_DESCRIPTION = """\
Search the shared memory (every bank you can read) before assuming anything about this user, \
machine, team or project: which tool or package manager, which host or port, how to build, \
test or deploy, why something was decided, what an error means. Ask in natural language, in \
Chinese or English. Results show `#id`, bank, trust, match and the source: a match of 0.50 \
or more is a confident one; weaker candidates shown only because a confident one passed are \
marked "below the gate". A result found through one of the fact's stored questions shows \
which one. A result reached through an outdated fact says so and shows the current one. An \
empty answer means nothing relevant is stored - proceed normally, and `add` what you then learn.\
"""

GET_DESCRIPTION = """\
Read one fact by id with its full history: source, verbatim quote, trust events (confirmed, \
disputed, reinforced), the facts it replaced and what replaced it. Use it before relying on, \
confirming, disputing or superseding a fact you only saw summarised.\
"""

SUPERSEDE_DESCRIPTION = """\
Replace facts that no longer hold with the current truth: stores the new fact (same rules as \
`add`: atomic, honest origin, real source, verbatim quote, bilingual tags, 2-4 questions in \
English and Chinese) and retires the old ones, linked to it with your reason, so a later \
recall of the old claim returns the new one. \
Use it when you have evidence the old claim changed (port moved, tool replaced, decision \
reversed). Pass every outdated id in `replaces`.\
"""

CONFIRM_DESCRIPTION = """\
You relied on fact `id` and checked that it still holds (you ran it, read the file, the user \
agreed): trust rises and its age decay restarts. Say how you checked in `reason`.\
"""

DISPUTE_DESCRIPTION = """\
Fact `id` looks wrong or did not work: trust falls and it is shown with less weight. Say what \
you saw in `reason`. If you know the correct claim, use `supersede` instead.\
"""

DELETE_DESCRIPTION = """\
Remove fact `id` from recall (soft delete; its history stays). Only for facts that should never \
have been stored: a secret, a transcript, a mistake with no current replacement. For outdated \
facts use `supersede`, for doubtful ones `dispute`.\
"""

LIST_CATEGORIES_DESCRIPTION = """\
List the categories facts are filed under in each bank (with what belongs in each and how \
many facts they hold). Call it when unsure which category a new fact belongs to.\
"""

ADD_CATEGORY_DESCRIPTION = """\
Add a category to a bank's registry, only when no existing category fits a whole class of \
facts (check `list_categories` first). Names: lowercase letters, digits, '-' or '_'.\
"""

Content = Annotated[str, Field(description="The fact: one atomic claim, a sentence or two, "
                                           "self-contained (name the system it is about).")]
Category = Annotated[str, Field(description="A category name: preferences, environment, "
                                            "project, decisions, gotchas, people, reference "
                                            "(or one from list_categories).")]
Kind = Annotated[SourceKind, Field(description="Where the fact comes from: file, url, commit, "
                                               "command, user (the user said it), doc.")]
Location = Annotated[str, Field(description="file: path[:line] (relative to the repository); "
                                            "url: the URL; commit: the SHA; command: the "
                                            "command run; user: empty or a short context.")]
Quote = Annotated[str, Field(description="Verbatim text from the source: the file lines, the "
                                         "page sentence, the command output, or the user's "
                                         "own words. Not a paraphrase.")]
# Not `min_length=1`: a missing or empty list would come back as a raw pydantic error. The
# tools check it themselves (`_need_tags`) and the schema still lists tags as required.
Tags = Annotated[list[str] | None, Field(
    description="3-8 tags naming the topic, the systems involved and their aliases/generic "
    "words, in both Chinese and English, e.g. [\"pnpm\", \"包管理器\", \"package manager\", "
    "\"node\"].")]
Questions = Annotated[list[str], Field(
    max_length=6,
    description="2-4 questions a later teammate would type whose answer is this fact, in BOTH "
    "English and Chinese whatever the fact's language; everyday words and aliases, not the "
    "fact's own wording (each is an extra search vector of the fact), e.g. [\"which package "
    "manager do we use?\", \"装依赖用 npm 还是 pnpm？\"].")]
OriginArg = Annotated[Origin, Field(description="user: the user said it; verified: you checked "
                                                "the source yourself; inferred: your conclusion.")]
Tentative = Annotated[bool, Field(description="True when you are not sure yet (lower trust).")]
ProjectArg = Annotated[str | None, Field(description="Project key; default: the current "
                                                     "repository. Use \"\" for a fact that holds "
                                                     "everywhere (e.g. a personal preference).")]
FactId = Annotated[int, Field(description="The fact id (shown as #id).")]
Reason = Annotated[str, Field(description="Why: what you checked or saw.")]

ClientFor = Callable[[Context], Client]
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _fail(exc: FactbankError) -> ToolError:
    return ToolError(str(exc))


NO_QUESTIONS = ("It has no questions, so only searches worded like it will find it: call add "
                "again with the same content plus 2-4 `questions` (English and Chinese); a "
                "repeat adds them to this fact.")


def build_server(client_for: ClientFor, *, local_files: bool,
                 default_project: Callable[[], str | None] = lambda: None,
                 name: str = "factbank") -> MCPServer:
    """The MCP server with every tool; `client_for(ctx)` gives the Client for a call (the
    stdio one, or one made from the request's bearer token). With `local_files`, a file
    source's quote is checked against the file on this machine before anything is sent."""
    level = os.environ.get("FACTBANK_LOG_LEVEL", "WARNING").upper()
    server = MCPServer(name, instructions=INSTRUCTIONS, version="1",
                       log_level=level if level in _LEVELS else "WARNING")

    def build_fact(content: str, category: str, source_kind: str, source_location: str,
                   quote: str, tags: list[str] | None, questions: list[str] | None, origin: str,
                   tentative: bool, project: str | None) -> dict:
        if not tags:
            raise ToolError(
                "tags is required: give 3-8 short tags naming the topic, the systems and their "
                "aliases, in English and Chinese, e.g. tags=[\"pnpm\", \"包管理器\", "
                "\"package manager\", \"node\"]; nothing was saved")
        try:
            return new_fact(content, category, source_kind, source_location, quote, tags=tags,
                            questions=questions, origin=origin, tentative=tentative,
                            project=default_project() if project is None else project,
                            check_files=local_files)
        except FactbankError as exc:
            raise ToolError(f"refused: {exc}") from None

    @server.tool(description=ADD_DESCRIPTION, structured_output=False)
    def add(content: Content, category: Category, source_kind: Kind, source_location: Location,
            quote: Quote, ctx: Context, tags: Tags = None,
            questions: Questions = [],  # noqa: B006 (pydantic copies it)
            origin: OriginArg = "inferred", tentative: Tentative = False,
            project: ProjectArg = None) -> str:
        fact = build_fact(content, category, source_kind, source_location, quote, tags,
                          questions, origin, tentative, project)
        try:
            return render.outcome_text(client_for(ctx).add(fact), str, NO_QUESTIONS)
        except FactbankError as exc:
            raise _fail(exc) from None

    @server.tool(description=SEARCH_DESCRIPTION, structured_output=False)
    def search(query: Annotated[str, Field(description="What you want to know, in natural "
                                                       "language (Chinese or English).")],
               ctx: Context,
               limit: Annotated[int, Field(ge=1, le=20, description="At most this many.")] = 5,
               project: ProjectArg = None) -> str:
        project = default_project() if project is None else project
        try:
            data = client_for(ctx).search(query, project=project or None, limit=limit)
        except FactbankError as exc:
            raise _fail(exc) from None
        return render.search_text(data)

    @server.tool(description=GET_DESCRIPTION, structured_output=False)
    def get(id: FactId, ctx: Context) -> str:
        try:
            data = client_for(ctx).history(id)
        except FactbankError as exc:
            raise _fail(exc) from None
        return render.history_text(data)

    @server.tool(description=SUPERSEDE_DESCRIPTION, structured_output=False)
    def supersede(replaces: Annotated[list[int], Field(min_length=1, description="Ids of the "
                                                       "facts that no longer hold.")],
                  reason: Annotated[str, Field(description="Why they no longer hold (the "
                                                           "evidence).")],
                  content: Content, category: Category, source_kind: Kind,
                  source_location: Location, quote: Quote, ctx: Context, tags: Tags = None,
                  questions: Questions = [],  # noqa: B006 (pydantic copies it)
                  origin: OriginArg = "inferred",
                  tentative: Tentative = False, project: ProjectArg = None) -> str:
        fact = build_fact(content, category, source_kind, source_location, quote, tags,
                          questions, origin, tentative, project)
        try:
            outcome = client_for(ctx).supersede(fact, replaces, reason)
        except FactbankError as exc:
            raise _fail(exc) from None
        return render.superseded_text(outcome, replaces, reason)

    def judge(method: str, verb: str, fact_id: int, reason: str, ctx: Context) -> str:
        try:
            fact = getattr(client_for(ctx), method)(fact_id, reason)
        except FactbankError as exc:
            raise _fail(exc) from None
        return render.judged_text(verb, fact)

    @server.tool(description=CONFIRM_DESCRIPTION, structured_output=False)
    def confirm(id: FactId, reason: Reason, ctx: Context) -> str:
        return judge("confirm", "Confirmed", id, reason, ctx)

    @server.tool(description=DISPUTE_DESCRIPTION, structured_output=False)
    def dispute(id: FactId, reason: Reason, ctx: Context) -> str:
        return judge("dispute", "Disputed", id, reason, ctx)

    @server.tool(description=DELETE_DESCRIPTION, structured_output=False)
    def delete(id: FactId, reason: Reason, ctx: Context) -> str:
        return judge("delete", "Deleted", id, reason, ctx)

    @server.tool(description=LIST_CATEGORIES_DESCRIPTION, structured_output=False)
    def list_categories(ctx: Context) -> str:
        try:
            data = client_for(ctx).categories()
        except FactbankError as exc:
            raise _fail(exc) from None
        return render.categories_text(data)

    @server.tool(description=ADD_CATEGORY_DESCRIPTION, structured_output=False)
    def add_category(name: Annotated[str, Field(description="lowercase, e.g. runbooks")],
                     description: Annotated[str, Field(description="What belongs in it.")],
                     ctx: Context,
                     auto_inject: Annotated[bool, Field(description="Inject its facts at every "
                                                        "session start (rarely).")] = False,
                     decays: Annotated[bool, Field(description="Facts lose trust with age "
                                                   "(false for preferences-like).")] = True
                     ) -> str:
        try:
            data = client_for(ctx).add_category(name, description, auto_inject=auto_inject,
                                                decays=decays)
        except FactbankError as exc:
            raise _fail(exc) from None
        return f"Added category {data['name']!r} to {data['bank']}."

    for tool in ("add", "supersede"):  # required in what the agent sees; checked in the tool
        schema = server._tool_manager.get_tool(tool).parameters
        if "tags" not in schema.setdefault("required", []):
            schema["required"].append("tags")
        if isinstance(schema["properties"].get("tags"), dict):
            prop = schema["properties"]["tags"]
            prop.pop("default", None)
            if "anyOf" in prop:  # list[str] | None: show the list
                prop.update(next(a for a in prop.pop("anyOf") if a.get("type") == "array"))
    return server


# --- stdio ---------------------------------------------------------------------------------


def stdio_server(agent: str, cfg: client_config.ClientConfig | None = None) -> MCPServer:
    """One agent's server over the local client config (every configured bank)."""
    client = Client(cfg or client_config.load(), agent=agent)
    return build_server(lambda _ctx: client, local_files=True,
                        default_project=lambda: project_key(Path.cwd()))


def run_stdio(agent: str) -> None:
    stdio_server(agent).run("stdio")


# --- streamable HTTP -----------------------------------------------------------------------


class TokenCheck:
    """ASGI middleware: every MCP request needs a bearer token the services accept.

    A token is checked with one cheap authenticated read on the recall service and the
    verdict cached for `ttl` seconds (keyed by its hash), so a revoked token stops working
    within `ttl` here and at once on every tool call (which forwards it).
    """

    def __init__(self, app: Any, cfg: client_config.ClientConfig, ttl: float = 30.0) -> None:
        self.app = app
        self.cfg = cfg
        self.ttl = ttl
        self._ok: dict[str, float] = {}
        self._http = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            await _deny(send, 401, "missing bearer token: send 'Authorization: Bearer <factbank "
                                   "token>'")
            return
        key = hashlib.sha256(token.encode()).hexdigest()
        if self._ok.get(key, 0) < time.monotonic():
            status, message = await self._check(token)
            if status != 200:
                await _deny(send, status, message)
                return
            now = time.monotonic()
            if len(self._ok) > 1000:  # forget expired verdicts
                self._ok = {k: t for k, t in self._ok.items() if t > now}
            self._ok[key] = now + self.ttl
        await self.app(scope, receive, send)

    async def _check(self, token: str) -> tuple[int, str]:
        """(200, "") for a token the services accept, else the status and a message for a
        caller who has not shown a valid token: it names no internal address, exception or
        service answer (those go to this server's log)."""
        try:
            r = await self._http.get(self.cfg.recall_url + "/v1/facts", params={"limit": 1},
                                     headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            log.warning("token check: recall at %s unreachable: %s", self.cfg.recall_url, exc)
            return 502, "factbank recall is unreachable from the MCP server; try again later"
        if r.status_code == 403:  # a token without the read scope is still a valid token
            return 200, ""
        if r.status_code == 401:
            return 401, "invalid or revoked token"
        if r.status_code >= 500:
            log.warning("token check: recall at %s answered %s", self.cfg.recall_url,
                        r.status_code)
            return 502, "factbank recall failed to check the token; try again later"
        return 200, ""


async def _deny(send: Any, status: int, message: str) -> None:
    """Refuse at the HTTP level, with a JSON-RPC error body so MCP clients show the reason
    (the SDK surfaces a JSON-RPC error from a non-2xx answer instead of a generic one)."""
    import json

    code = -32001 if status == 401 else -32603
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": code, "message": f"{status} {message}"}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="factbank"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(cfg: client_config.ClientConfig | None = None, *, host: str = "127.0.0.1",
             path: str = "/mcp") -> Any:
    """The stateless streamable-HTTP ASGI app: each call runs with the caller's own token."""
    cfg = cfg or client_config.load()
    shared = httpx.Client(timeout=DEFAULT_TIMEOUT)

    def client_for(ctx: Context) -> Client:
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        token = headers.get("authorization", "").partition(" ")[2].strip()
        if not token:
            raise ToolError("missing bearer token")
        one = client_config.ClientConfig(url=cfg.url, recall_url=cfg.recall_url,
                                         tokens={client_config.PERSONAL: token})
        agent = headers.get(AGENT_HEADER.lower()) or "mcp-http"
        return Client(one, agent=agent, http=shared)

    server = build_server(client_for, local_files=False)
    app = server.streamable_http_app(streamable_http_path=path, stateless_http=True,
                                     json_response=True, host=host)
    return TokenCheck(app, cfg)


def run_http(host: str, port: int, path: str = "/mcp") -> None:
    import uvicorn

    level = os.environ.get("FACTBANK_LOG_LEVEL", "warning").lower()
    uvicorn.run(http_app(host=host, path=path), host=host, port=port, log_level=level,
                lifespan="on")
