"""Every `FACTBANK_*` variable the client reads, declared once: name, type, default, meaning
and the commands that use it. Client modules read the environment through `settings` (a unit
test fails on a direct read), and docs/cli.md's table is generated from these declarations
(`python -m factbank_client.settings` prints it; a unit test fails when it is stale).

Values are read at each attribute access, never cached: tests and the CLI change the
environment at run time, and one long-lived dashboard or MCP server must see a new token.
`ClientSettings(env)` reads another mapping (a harness's environment) the same way.

The prompt hook imports this module on every prompt, so it is standard library only and
loads nothing itself (`os` is every hook's first import anyway): no dataclasses, typing or
enum, whose imports cost 20.9, 12.3 and 4.9 ms of CPU here against this module's 0.42 ms
(an empty module: 0.17 ms), medians of 15 fresh `python -I -S` processes on the shared 2-core
box at load 18. Descriptors on a plain class give typed attributes; each class costs ~18 us
cold, so there are only as many as there are kinds of value.
"""

import os  # no `from __future__ import annotations`: even that is a module to load

TYPE_CHECKING = False  # not `from typing import ...` (see above)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping


class _Var:
    """One variable: its name, its default as the table shows it, what it means and which
    commands read it. Reads of an unset or empty variable give the default."""

    kind = "text"

    def __init__(self, name: str, default: str, doc: str, used_by: str) -> None:
        self.name = name
        self.default = default
        self.doc = doc
        self.used_by = used_by

    def raw(self, env: "Mapping[str, str]") -> str:
        return env.get(self.name) or ""


class _Text(_Var):
    def __get__(self, obj: "ClientSettings", owner: type | None = None) -> str:
        return self.raw(obj.env) or self.default


class _Flag(_Var):
    """On unless the variable is `0` (as the shell scripts and the Pi extension test it)."""

    kind = "flag"

    def __get__(self, obj: "ClientSettings", owner: type | None = None) -> bool:
        return self.raw(obj.env) != "0"


class _Seconds(_Var):
    """A number of seconds; one that does not parse is the default (a hook never fails on a
    typo), and none is below `least`."""

    kind = "seconds"

    def __init__(self, name: str, default: str, doc: str, used_by: str, least: float) -> None:
        super().__init__(name, default, doc, used_by)
        self.least = least

    def __get__(self, obj: "ClientSettings", owner: type | None = None) -> float:
        try:
            value = float(self.raw(obj.env) or self.default)
        except ValueError:
            value = float(self.default)
        return max(self.least, value)


class _Each(_Var):
    """A family of variables, one per key: `<AGENT>` in `name` is the key in upper case."""

    def __get__(self, obj: "ClientSettings", owner: type | None = None
                ) -> "Callable[[str], str]":
        env = obj.env
        return lambda key: env.get(self.name.replace("<AGENT>", key.upper())) or self.default


CONNECTION = "every command that calls the services, the hooks, `mcp`, the Pi extension"


class ClientSettings:
    """The client's settings from `env` (default: this process's environment), each read
    when asked for. The attribute names are the variables' names without `FACTBANK_`."""

    def __init__(self, env: "Mapping[str, str] | None" = None) -> None:
        self._env = env

    @property
    def env(self) -> "Mapping[str, str]":
        return os.environ if self._env is None else self._env

    config = _Text(
        "FACTBANK_CONFIG", "",
        "The client config file; unset = `$XDG_CONFIG_HOME/factbank/config.toml` "
        "(`~/.config/...`).", CONNECTION + ", `login`")
    url = _Text(
        "FACTBANK_URL", "",
        "The ingest service's URL, over the config's `url` (default `http://127.0.0.1:8701`).",
        CONNECTION)
    recall_url = _Text(
        "FACTBANK_RECALL_URL", "",
        "The recall service's URL, over the config's `recall_url` (default: the ingest port + 1).",
        CONNECTION)
    token = _Text(
        "FACTBANK_TOKEN", "",
        "A token for the `personal` bank, over the config's.", CONNECTION)
    team_token = _Text(
        "FACTBANK_TEAM_TOKEN", "",
        "A token for the `team` bank, over the config's.", CONNECTION)
    agent = _Text(
        "FACTBANK_AGENT", "cli",
        "The agent recorded with every write (`X-Factbank-Agent`).",
        "every write command, `mcp`")
    session_id = _Text(
        "FACTBANK_SESSION_ID", "",
        "The harness session a call belongs to; unset = found from the hooks' marker, then "
        "`CLAUDE_CODE_SESSION_ID` (docs/misses.md).",
        "every call to the services (`X-Factbank-Session`), `handoff`")
    hook_timeout = _Seconds(
        "FACTBANK_HOOK_TIMEOUT", "0.9",
        "The hooks' deadline in seconds (at least 0.05), interpreter start-up included.",
        "the Claude Code and Codex hooks, the Pi extension", least=0.05)
    inject_check = _Flag(
        "FACTBANK_INJECT_CHECK", "1",
        "`0`: the facts injected are not checked against the working tree first.",
        "the session-start and prompt hooks, `inject-preview`, the Pi extension")
    verify = _Flag(
        "FACTBANK_VERIFY", "1",
        "`0`: no background `verify` after a session's turn or a commit.",
        "the stop hook, the git post-commit and pre-push hooks, the Pi extension")
    timeline = _Flag(
        "FACTBANK_TIMELINE", "1",
        "`0`: the session-start hook records no session on the timeline.",
        "the session-start hook")
    pre_push = _Text(
        "FACTBANK_PRE_PUSH", "warn",
        "`block`: the pre-push hook refuses a push that would make a fact stale.",
        "the git pre-push hook (`install git --pre-push`)")
    code_embed = _Flag(
        "FACTBANK_CODE_EMBED", "1",
        "`0`: the code graph does not embed symbols with the local embedder (names only).",
        "`code index`, `code search`")
    codex_bin = _Text(
        "FACTBANK_CODEX_BIN", "",
        "The `codex` binary that trusts the hooks; unset = `codex` on PATH.",
        "`install` (trusting the Codex hooks), `doctor`")
    dispatch_bin = _Each(
        "FACTBANK_DISPATCH_<AGENT>", "",
        "The binary of one agent `dispatch` starts (e.g. `FACTBANK_DISPATCH_CLAUDE`); "
        "unset = the agent's name on PATH.", "`dispatch`, the dashboard's dispatch page")
    client_redaction = _Text(
        "FACTBANK_CLIENT_REDACTION", "",
        "`fallback`: the client's own redaction even when the server's is installed "
        "(to measure and test it).",
        "`dispatch`, `verify --diff`, a bad URL's error message")
    log_level = _Text(
        "FACTBANK_LOG_LEVEL", "WARNING",
        "The MCP server's log level (the services read it too, with their own default: "
        "docs/operations.md).", "`mcp` (stdio and `--http`)")


settings = ClientSettings()


def declared() -> "Iterator[_Var]":
    """Every variable, in declaration order."""
    return (v for v in vars(ClientSettings).values() if isinstance(v, _Var))


def table() -> str:
    """The Markdown table docs/cli.md shows."""
    rows = ["| variable | default | meaning | read by |", "|---|---|---|---|"]
    for v in declared():
        default = f"`{v.default}`" if v.default else "unset"
        rows.append(f"| `{v.name}` | {default} | {v.doc} | {v.used_by} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
