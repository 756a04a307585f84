"""`factbank mcp`: the MCP server, over stdio for one agent or streamable HTTP for many."""

from __future__ import annotations

from factbank_common.commands import CommandError

AGENTS = ("claude-code", "codex", "pi", "gemini", "qwen", "opencode", "copilot")


def register(sub) -> None:
    p = sub.add_parser(
        "mcp", help="run the MCP server (stdio for one agent, or --http)",
        description="stdio: `factbank mcp --agent claude-code` (codex, pi), started by the "
        "agent, using this machine's client config. HTTP: `factbank mcp --http --port 8703`, "
        "stateless; every request must carry 'Authorization: Bearer <factbank token>'.")
    p.add_argument("--agent", default=None,
                   help=f"which agent runs this stdio server ({', '.join(AGENTS)}); recorded "
                        "with every write")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    p.add_argument("--port", type=int, default=8703, help="HTTP port (default 8703)")
    p.add_argument("--path", default="/mcp", help="HTTP endpoint path")
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args) -> int:
    from factbank_client import mcp_server

    if args.http:
        if args.agent:
            raise CommandError("--agent is for stdio; over HTTP each caller sends "
                               "X-Factbank-Agent itself")
        mcp_server.run_http(args.host, args.port, args.path)
        return 0
    mcp_server.run_stdio(args.agent or "mcp")
    return 0
