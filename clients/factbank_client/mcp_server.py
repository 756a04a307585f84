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
not just what it does (docs/principles.md#the-writer-bridges-the-words and
#the-writer-asks-the-questions: the writer is an LLM; ask it for tags that
bridge languages and aliases, and for the questions a later teammate would ask). They live in
assets/tools.toml (factbank_client/tools.py), the one table the Pi extension is written from
too; the answers are written by factbank_client/render.py.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from factbank_client import config as client_config
from factbank_client import history, render, tools
from factbank_client.client import AGENT_HEADER, DEFAULT_TIMEOUT, Client, new_fact
from factbank_client.errors import FactbankError
from factbank_client.project import project_key
from factbank_client.settings import settings
from factbank_common.schema import MAX_QUESTIONS, SEARCH_LIMIT, SEARCH_LIMIT_MAX, Origin, SourceKind

log = logging.getLogger("factbank.mcp")

TEXTS = tools.texts("mcp")  # every description below comes from assets/tools.toml


def _text(param: str, tool: str = "add") -> str:
    return TEXTS.param(tool, param)


# The parameters add and supersede share (and search's project).
Content = Annotated[str, Field(description=_text("content"))]
Category = Annotated[str, Field(description=_text("category"))]
Kind = Annotated[SourceKind, Field(description=_text("source_kind"))]
Location = Annotated[str, Field(description=_text("source_location"))]
Quote = Annotated[str, Field(description=_text("quote"))]
# Not `min_length=1`: a missing or empty list would come back as a raw pydantic error. The
# tools check it themselves (`build_fact`) and the schema still lists tags as required.
Tags = Annotated[list[str] | None, Field(description=_text("tags"))]
Questions = Annotated[list[str], Field(max_length=MAX_QUESTIONS,
                                       description=_text("questions"))]
OriginArg = Annotated[Origin, Field(description=_text("origin"))]
Tentative = Annotated[bool, Field(description=_text("tentative"))]
ProjectArg = Annotated[str | None, Field(description=_text("project"))]
FactId = Annotated[int, Field(description=_text("id", "confirm"))]
Reason = Annotated[str, Field(description=_text("reason", "confirm"))]

# The code graph's parameters (find_callers, find_references, explain_symbol).
SymbolArg = Annotated[str, Field(min_length=1, description=_text("symbol", "find_callers"))]
CodeLimit = Annotated[int, Field(ge=1, le=500, description=_text("limit", "find_callers"))]
SearchCodeQuery = Annotated[str, Field(min_length=1, description=_text("query", "search_code"))]
SearchCodeLimit = Annotated[int, Field(ge=1, le=100, description=_text("limit", "search_code"))]

ClientFor = Callable[[Context], Client]
T = TypeVar("T")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _call(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """`fn(*args, **kw)`, with a FactbankError (the server's refusal, every reason on one
    line) raised as the tool's error."""
    try:
        return fn(*args, **kw)
    except FactbankError as exc:
        raise ToolError(str(exc)) from None


def enrich_text(data: dict, tool: str) -> str:
    """A batch of facts to enrich, one line each, and what to do with it."""
    from factbank_common.inert import inert

    facts = data.get("facts") or []
    if not facts:
        return "No fact lacks questions or tags."
    lines = [f"{len(facts)} of {data.get('remaining', len(facts))} facts lacking questions or "
             f"tags. For each, call {tool} with its id, 3-8 tags and 2-4 questions (English "
             "AND Chinese), written from the fact alone:"]
    for f in facts:
        have = f"{len(f.get('tags') or [])} tags, {len(f.get('questions') or [])} questions"
        lines.append(inert(f"- #{f['id']} ({f['category']}; {have}) {f['content']}", 800))
    return "\n".join(lines)


def build_server(client_for: ClientFor, *, local_files: bool,
                 default_project: Callable[[], str | None] = lambda: None,
                 name: str = "factbank") -> MCPServer:
    """The MCP server with every tool; `client_for(ctx)` gives the Client for a call (the
    stdio one, or one made from the request's bearer token). With `local_files`, a file
    source's quote is checked against the file on this machine before anything is sent."""
    level = settings.log_level.upper()
    server = MCPServer(name, instructions=TEXTS.instructions, version="1",
                       log_level=level if level in _LEVELS else "WARNING")

    def tool(fn: Callable[..., str]) -> Callable[..., str]:
        """Register `fn` as the tool of its name, described as tools.toml says."""
        return server.tool(description=TEXTS.tools[fn.__name__].description,
                           structured_output=False)(fn)

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

    @tool
    def add(content: Content, category: Category, source_kind: Kind, source_location: Location,
            quote: Quote, ctx: Context, tags: Tags = None,
            questions: Questions = [],  # noqa: B006 (pydantic copies it)
            origin: OriginArg = "inferred", tentative: Tentative = False,
            project: ProjectArg = None) -> str:
        fact = build_fact(content, category, source_kind, source_location, quote, tags,
                          questions, origin, tentative, project)
        return render.outcome_text(_call(client_for(ctx).add, fact), TEXTS.name,
                                   TEXTS.messages["no_questions"])

    @tool
    def search(query: Annotated[str, Field(description=_text("query", "search"))],
               ctx: Context,
               limit: Annotated[int, Field(ge=1, le=SEARCH_LIMIT_MAX,
                                           description=_text("limit", "search"))] = SEARCH_LIMIT,
               project: ProjectArg = None) -> str:
        project = default_project() if project is None else project
        return render.search_text(_call(client_for(ctx).search, query, project=project or None,
                                        limit=limit))

    @tool
    def get(id: FactId, ctx: Context) -> str:
        return render.history_text(_call(client_for(ctx).history, id))

    @tool
    def supersede(replaces: Annotated[list[int], Field(
                      min_length=1, description=_text("replaces", "supersede"))],
                  reason: Annotated[str, Field(description=_text("reason", "supersede"))],
                  content: Content, category: Category, source_kind: Kind,
                  source_location: Location, quote: Quote, ctx: Context, tags: Tags = None,
                  questions: Questions = [],  # noqa: B006 (pydantic copies it)
                  origin: OriginArg = "inferred",
                  tentative: Tentative = False, project: ProjectArg = None) -> str:
        fact = build_fact(content, category, source_kind, source_location, quote, tags,
                          questions, origin, tentative, project)
        outcome = _call(client_for(ctx).supersede, fact, replaces, reason)
        return render.superseded_text(outcome, replaces, reason)

    def judge(method: str, verb: str, fact_id: int, reason: str, ctx: Context) -> str:
        return render.judged_text(verb, _call(getattr(client_for(ctx), method), fact_id, reason))

    @tool
    def confirm(id: FactId, reason: Reason, ctx: Context) -> str:
        evidence = None
        if local_files:  # the rule gate reads the project and remotes off the confirm
            from factbank_client.project import confirm_evidence

            evidence = confirm_evidence(Path.cwd(), default_project()) or None
        return render.judged_text("Confirmed", _call(client_for(ctx).confirm, id, reason,
                                                     evidence=evidence))

    @tool
    def dispute(id: FactId, reason: Reason, ctx: Context) -> str:
        return judge("dispute", "Disputed", id, reason, ctx)

    @tool
    def delete(id: FactId, reason: Reason, ctx: Context) -> str:
        return judge("delete", "Deleted", id, reason, ctx)

    @tool
    def list_categories(ctx: Context) -> str:
        return render.categories_text(_call(client_for(ctx).categories))

    @tool
    def add_category(name: Annotated[str, Field(description=_text("name", "add_category"))],
                     description: Annotated[str, Field(
                         description=_text("description", "add_category"))],
                     ctx: Context,
                     auto_inject: Annotated[bool, Field(
                         description=_text("auto_inject", "add_category"))] = False,
                     decays: Annotated[bool, Field(
                         description=_text("decays", "add_category"))] = True) -> str:
        data = _call(client_for(ctx).add_category, name, description, auto_inject=auto_inject,
                     decays=decays)
        return f"Added category {data['name']!r} to {data['bank']}."

    @tool
    def handoff(text: Annotated[str, Field(min_length=1,
                                           description=_text("text", "handoff"))],
                ctx: Context,
                to_agent: Annotated[str | None, Field(
                    description=_text("to_agent", "handoff"))] = None,
                to_member: Annotated[str | None, Field(
                    description=_text("to_member", "handoff"))] = None,
                files: Annotated[list[str], Field(
                    max_length=50, description=_text("files", "handoff"))] = [],  # noqa: B006
                fact_ids: Annotated[list[int], Field(
                    max_length=50, description=_text("fact_ids", "handoff"))] = [],  # noqa: B006
                project: ProjectArg = None) -> str:
        project = default_project() if project is None else project
        if not project:
            raise ToolError("a handoff is for the next session in a project: run in a "
                            "repository or pass `project`; nothing was saved")
        if local_files:  # stored relative to the repository root, as the hooks record paths
            cwd = os.getcwd()
            root = history.repo_root(cwd)
            files = [history.relative(f, root, cwd) for f in files]
        out = _call(client_for(ctx).handoff, text, project=project, to_agent=to_agent or None,
                    to_member=to_member or None, files=files, fact_ids=fact_ids)
        return render.handoff_line(out, project)

    if local_files:  # the code graph reads this machine's checkout: stdio only
        _code_tools(server, client_for, default_project)

    @tool
    def facts_to_enrich(ctx: Context,
                        limit: Annotated[int, Field(ge=1, le=50, description=_text(
                            "limit", "facts_to_enrich"))] = 10,
                        lacking: Annotated[Literal["questions", "tags", "either"], Field(
                            description=_text("lacking", "facts_to_enrich"))] = "either") -> str:
        data = _call(client_for(ctx).enrich_batch, limit=limit, lacking=lacking)
        return enrich_text(data, TEXTS.name("enrich"))

    @tool
    def enrich(id: FactId, ctx: Context, tags: Tags = None,
               questions: Questions = []) -> str:  # noqa: B006 (pydantic copies it)
        if not tags and not questions:
            raise ToolError("give tags, questions or both; nothing was changed")
        fact = _call(client_for(ctx).enrich_fact, id, tags=tags or [], questions=questions)
        return (f"Fact #{fact['id']} now has {len(fact.get('tags') or [])} tags and "
                f"{len(fact.get('questions') or [])} questions.")

    @tool
    def review_queue(ctx: Context) -> str:
        from factbank_client.cli.queue import candidate_lines

        data = _call(client_for(ctx).queue_list)
        if not data:
            return "The review queue is empty."
        return "\n".join(line for c in data for line in candidate_lines(c))

    @tool
    def decide_candidate(id: Annotated[int, Field(description=_text("id", "decide_candidate"))],
                         accept: Annotated[bool, Field(description=_text(
                             "accept", "decide_candidate"))],
                         ctx: Context,
                         reason: Annotated[str, Field(description=_text(
                             "reason", "decide_candidate"))] = "",
                         content: Annotated[str | None, Field(description=_text(
                             "content", "decide_candidate"))] = None,
                         tags: Annotated[list[str] | None, Field(description=_text(
                             "tags", "decide_candidate"))] = None,
                         questions: Annotated[list[str] | None, Field(description=_text(
                             "questions", "decide_candidate"))] = None) -> str:
        client = client_for(ctx)
        if not accept:
            _call(client.queue_reject, id, reason)
            return f"Rejected candidate {id}: its text will not be proposed again."
        edits = {k: v for k, v in (("content", content), ("tags", tags),
                                   ("questions", questions)) if v}
        data = _call(client.queue_accept, id, edits=edits or None)
        fact = data["outcome"]["fact"]
        cand = data["candidate"]
        return (f"Accepted candidate {id}: stored #{fact['id']}"
                + (f", superseding #{cand['replaces']} ({cand['reason']})"
                   if cand.get("replaces") else "") + ".")

    @tool
    def queue_correction(replaces: Annotated[int, Field(ge=0, description=_text(
                             "replaces", "queue_correction"))],
                         reason: Annotated[str, Field(description=_text(
                             "reason", "queue_correction"))],
                         content: Content, category: Category, source_kind: Kind,
                         source_location: Location, quote: Quote, ctx: Context,
                         tags: Tags = None,
                         questions: Questions = [],  # noqa: B006 (pydantic copies it)
                         origin: OriginArg = "inferred", tentative: Tentative = False,
                         project: ProjectArg = None) -> str:
        fact = build_fact(content, category, source_kind, source_location, quote, tags,
                          questions, origin, tentative, project)
        cand = _call(client_for(ctx).queue_add, fact, replaces=replaces or None, reason=reason)
        return (f"Queued candidate {cand['id']} for review"
                + (f" (it would supersede #{replaces})" if replaces else "")
                + ": nothing changed until someone accepts it.")

    for key in ("add", "supersede", "queue_correction"):  # required in what the agent sees
        schema = server._tool_manager.get_tool(key).parameters
        if "tags" not in schema.setdefault("required", []):
            schema["required"].append("tags")
        if isinstance(schema["properties"].get("tags"), dict):
            prop = schema["properties"]["tags"]
            prop.pop("default", None)
            if "anyOf" in prop:  # list[str] | None: show the list
                prop.update(next(a for a in prop.pop("anyOf") if a.get("type") == "array"))
    return server


def _code_tools(server: MCPServer, client_for: ClientFor,
                default_project: Callable[[], str | None]) -> None:
    """find_callers, find_references, explain_symbol, search_code: the local code graph
    (factbank_client/code), answered in the words `factbank code` prints."""

    def tool(fn: Callable[..., str]) -> Callable[..., str]:
        return server.tool(description=TEXTS.tools[fn.__name__].description,
                           structured_output=False)(fn)

    def answer(name: str, arg: str, limit: int, **kw: Any) -> str:
        from factbank_client.code import answers

        try:
            out = answers.run(name, arg, cwd=Path.cwd(), limit=limit, **kw)
        except (answers.IndexError_, ValueError) as exc:
            raise ToolError(str(exc)) from None
        return "\n".join(answers.text(out))

    @tool
    def find_callers(symbol: SymbolArg, limit: CodeLimit = 20) -> str:
        return answer("callers", symbol, limit)

    @tool
    def find_references(symbol: SymbolArg, limit: CodeLimit = 20) -> str:
        return answer("refs", symbol, limit)

    @tool
    def explain_symbol(symbol: SymbolArg, ctx: Context, project: ProjectArg = None) -> str:
        try:
            client = client_for(ctx)
        except Exception:  # no bank configured: the code is still explained
            client = None
        return answer("explain", symbol, 20, client=client,
                      project=default_project() if project is None else project or None)

    @tool
    def search_code(query: SearchCodeQuery, limit: SearchCodeLimit = 10) -> str:
        return answer("search", query, limit)


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

    level = settings.log_level.lower()
    uvicorn.run(http_app(host=host, path=path), host=host, port=port, log_level=level,
                lifespan="on")
