"""`factbank doctor` (is everything in place, and what to do if not) and `factbank completion`
(shell completion scripts built from the parser itself).

Doctor checks what a first day needs, in the order a user fixes it: the client config, both
services (and, through their /readyz, the database and Redis), each bank's token, the
harnesses' hooks (installed as `factbank install` would write them now, Codex's trusted), the
embedded server left by `up` (when the server extra is here) and the free disk. Each check
is ok, warn (works, worth a look) or fail; the exit code is 1 when any fails, so a script or
CI can run it.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from factbank_client.errors import InstallError
from factbank_common.output import add_json_flag, print_json

# Free space below which doctor warns / fails: Postgres refuses writes on a full disk, and
# the vectors of 10k facts take ~20 MB, so 1 GiB is a comfortable margin and 100 MiB is not.
DISK_WARN = 1 << 30
DISK_FAIL = 100 << 20


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def register(sub) -> None:
    p = sub.add_parser(
        "doctor", help="check config, services, tokens, hooks, Redis and disk",
        description="Check the client config, both services (database and Redis through "
                    "their /readyz), each bank's token, the hooks of the harnesses present "
                    "(installed and current; Codex's trusted), a PostgreSQL left by a killed "
                    "`up`, and the free disk. Exit code 1 when a check fails.")
    add_json_flag(p)
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)",
        description="Print the completion script for your shell. bash: add "
                    "`eval \"$(factbank completion bash)\"` to ~/.bashrc; zsh: "
                    "`eval \"$(factbank completion zsh)\"` in ~/.zshrc; fish: "
                    "`factbank completion fish > ~/.config/fish/completions/factbank.fish`.")
    p.add_argument("shell", choices=["bash", "zsh", "fish"], help="bash, zsh or fish")
    p.set_defaults(func=cmd_completion)


# --- doctor --------------------------------------------------------------------------------


def _config_checks() -> tuple[list[Check], object | None]:
    import tomllib

    from factbank_client import config as client_config

    path = client_config.config_path()
    checks: list[Check] = []
    login = "factbank login --url INGEST_URL --token TOKEN"
    if path.is_file():
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            return [Check("config", "fail", f"{path} cannot be read: {exc}",
                          f"fix or remove it, then {login}")], None
        for key in ("url", "recall_url"):
            if key in data:
                try:
                    read = client_config.normalize_url(str(data[key]), key)
                except ValueError as exc:
                    checks.append(Check("config", "fail", f"{path}: {exc}", login))
                    continue
                if read != data[key]:  # e.g. saved without a scheme by an older login
                    checks.append(Check("config", "warn", f"{path}: {key} is saved as "
                                        f"{data[key]!r}, read as {read!r}", login))
    cfg = client_config.load()
    if not cfg.tokens:
        checks.append(Check("config", "fail", f"no bank token in {path} or FACTBANK_TOKEN",
                            login))
        return checks, None
    if not any(c.status == "fail" for c in checks):
        checks.append(Check("config", "ok", f"{path}: banks {', '.join(cfg.banks)}; ingest "
                                            f"{cfg.url}, recall {cfg.recall_url}"))
    return checks, cfg


def _service_checks(cfg) -> list[Check]:
    import httpx

    checks = []
    for name, base in (("ingest", cfg.url), ("recall", cfg.recall_url)):
        try:
            r = httpx.get(f"{base}/readyz", timeout=3)
            body = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            why = str(exc).rstrip(".") or type(exc).__name__
            checks.append(Check(name, "fail", f"{base}: not answering ({why})",
                                "start it: factbank up (factbank status shows what runs)"))
            continue
        parts = {k: v for k, v in body.items() if k != "status"} if isinstance(body, dict) \
            else {}
        detail = f"{base}: " + ", ".join(f"{k} {v}" for k, v in parts.items())
        ok = r.status_code == 200
        checks.append(Check(name, "ok" if ok else "fail", detail,
                            "" if ok else "see the service's log (factbank status)"))
        if name == "recall":
            redis = parts.get("redis")
            checks.append(Check("redis", "ok" if redis in (None, "ok") else "fail",
                                "not configured (in-process cache)" if redis is None
                                else f"{redis} (through recall's /readyz)",
                                "" if redis in (None, "ok") else "check REDIS_URL and Redis"))
    return checks


def _token_checks(cfg) -> list[Check]:
    from factbank_client.cli.login import verify
    from factbank_client.config import ClientConfig

    checks = []
    for bank in cfg.banks:
        one = ClientConfig(cfg.url, cfg.recall_url, {bank: cfg.tokens[bank]})
        problems = [p for p in verify(one, bank) if "refused the token" in p]
        checks.append(Check(f"token {bank}", "fail" if problems else "ok",
                            "; ".join(problems) or "accepted by ingest and recall",
                            f"factbank login --bank {bank} --token TOKEN" if problems else ""))
    return checks


def _hook_checks() -> list[Check]:
    from factbank_client.install import common
    from factbank_client.install import harnesses as installer

    paths = common.Paths.from_env()
    checks = []
    for harness in common.HARNESSES:
        if not installer.present(harness, paths):
            checks.append(Check(f"hooks {harness}", "ok",
                                f"{harness} is not on this machine: nothing to check"))
            continue
        try:
            current = installer.plan_install([harness], paths).empty
        except InstallError as exc:
            checks.append(Check(f"hooks {harness}", "fail", str(exc), ""))
            continue
        if not current:
            checks.append(Check(f"hooks {harness}", "fail", "not installed, or not as this "
                                "factbank would write them", f"factbank install {harness}"))
            continue
        n = installer.registered(harness, paths)
        checks.append(Check(f"hooks {harness}", "ok",
                            f"installed and current ({n} hook{'s' if n != 1 else ''} "
                            "or extension registered)"))
        if harness == "codex":
            checks.append(_codex_trust(paths))
    return checks


def _codex_trust(paths) -> Check:
    from factbank_client.install import codex_trust

    try:
        states = codex_trust.status(paths)
    except InstallError as exc:
        return Check("hooks codex trust", "warn", f"cannot ask Codex: {exc}",
                     "in Codex: /hooks")
    untrusted = sorted(e for e, s in states.items() if s.lower() != "trusted")
    if not states or untrusted:
        return Check("hooks codex trust", "fail",
                     f"not trusted: {', '.join(untrusted) or 'no factbank hook listed'}",
                     "factbank install codex --trust (or /hooks in Codex)")
    return Check("hooks codex trust", "ok", f"trusted: {', '.join(sorted(states))}")


def _server_checks() -> tuple[list[Check], list[Path]]:
    """A Postgres left by a killed `up` (server extra only), and the data dir for the disk
    check."""
    import importlib.util

    if importlib.util.find_spec("psutil") is None:  # a light client install: no server here
        return [], []
    from factbank.runtime import lifecycle
    from factbank.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:
        return [Check("server settings", "fail", str(exc))], []
    running = lifecycle.running(settings.home)
    checks = []
    if running.orphaned:
        checks.append(Check("postgres", "fail",
                            f"pid {running.postgres_pid} runs on {running.pgdata} with no "
                            "`factbank up` holding it", "factbank down"))
    return checks, [settings.home]


def _disk_checks(dirs: list[Path]) -> list[Check]:
    checks = []
    for d in dirs:
        probe = Path(d)
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        status = "fail" if free < DISK_FAIL else "warn" if free < DISK_WARN else "ok"
        checks.append(Check(f"disk {d}", status, f"{free / (1 << 30):.1f} GiB free",
                            "" if status == "ok" else "free some space"))
    return checks


def run_checks() -> list[Check]:
    from factbank_client import config as client_config

    checks, cfg = _config_checks()
    if cfg is not None:
        checks += _service_checks(cfg)
        if all(c.status == "ok" for c in checks if c.name in ("ingest", "recall")):
            checks += _token_checks(cfg)
    checks += _hook_checks()
    server, dirs = _server_checks()
    checks += server
    checks += _disk_checks([client_config.config_path().parent, *dirs])
    return checks


def cmd_doctor(args) -> int:
    checks = run_checks()
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        print_json({"ok": not failed, "checks": [asdict(c) for c in checks]})
        return 1 if failed else 0
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{c.status:<4}  {c.name:<{width}}  {c.detail}"
              + (f"\n      {'':<{width}}  fix: {c.fix}" if c.fix else ""))
    bad = sum(c.status == "fail" for c in checks)
    print(f"{bad} problem(s)" if bad else "everything looks fine", file=sys.stderr)
    return 1 if failed else 0


# --- completion ----------------------------------------------------------------------------


def _tree(parser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[list, list]]:
    """{command path: (its subcommands and choices, its options)} for the whole parser."""
    import argparse

    words: list[str] = []
    options: list[str] = []
    out: dict[tuple[str, ...], tuple[list, list]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                out.update(_tree(sub, (*path, name)))
        elif action.option_strings:
            options += [o for o in action.option_strings if o.startswith("--")]
        elif action.choices:
            words += [str(c) for c in action.choices]
    out[path] = (words, options)
    return out


def script(shell: str, parser) -> str:
    tree = _tree(parser)
    if shell == "fish":
        lines = ["# factbank completion for fish", "complete -c factbank -f"]
        for path, (words, options) in sorted(tree.items()):
            if path:
                cond = " && ".join(f"__fish_seen_subcommand_from {w}" for w in path)
            else:
                cond = "__fish_use_subcommand"
            if words:
                lines.append(f"complete -c factbank -n '{cond}' -a '{' '.join(words)}'")
            for opt in options:
                lines.append(f"complete -c factbank -n '{cond}' -l {opt[2:]}")
        return "\n".join(lines) + "\n"
    cases = "\n".join(
        f"        '{' '.join(path)}') words='{' '.join(words + options)}' ;;"
        for path, (words, options) in sorted(tree.items()))
    bash = f"""# factbank completion for bash (and zsh through bashcompinit)
_factbank_complete() {{
    local path="" w i words=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        [[ "$w" == -* ]] && continue
        case "$(_factbank_words "${{path# }} $w")" in
            __none__) ;;
            *) path="$path $w" ;;
        esac
    done
    words="$(_factbank_words "${{path# }}")"
    [[ "$words" == __none__ ]] && words=""
    COMPREPLY=($(compgen -W "$words" -- "${{COMP_WORDS[COMP_CWORD]}}"))
}}
_factbank_words() {{
    case "${{1# }}" in
{cases}
        *) words='__none__' ;;
    esac
    echo "$words"
}}
complete -o default -F _factbank_complete factbank
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash


def cmd_completion(args) -> int:
    from factbank_client.cli.main import build_parser

    sys.stdout.write(script(args.shell, build_parser()))
    return 0
