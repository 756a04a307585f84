"""`factbank admin`: banks, members, tokens and the audit log, straight on the database.

Operators run these on the server machine (DATABASE_URL, or the embedded default in
FACTBANK_HOME). Tokens are printed once, when issued or rotated, and never again. Every
command calls the store (`factbank.store.banks`, `audit`); none writes SQL of its own. The
store is imported when a command runs, not when `factbank` builds its parser (asyncpg).
"""

from __future__ import annotations

import asyncio
import csv
import json
import sys
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from factbank_common.commands import CommandError
from factbank_common.output import add_json_flag, print_json, print_table

TOKEN_ID_HELP = "the token's id (`factbank admin token list`), not the token itself"


def register(sub) -> None:
    admin = sub.add_parser("admin", help="banks, members, tokens, audit (operators)",
                           description="Operator commands, run on the server machine against "
                           "its database (DATABASE_URL, else the embedded one in "
                           "FACTBANK_HOME): create banks and set their redaction policy, add "
                           "team members, issue, list, rotate and revoke tokens, verify and "
                           "export the audit chain.")
    groups = admin.add_subparsers(dest="group", metavar="GROUP", required=True)

    bank = groups.add_parser("bank", help="create and list banks").add_subparsers(
        dest="action", required=True)
    p = bank.add_parser("create", help="create a personal or team bank")
    p.add_argument("name", help="the new bank's name (lowercase, digits, '-', '_', '.')")
    p.add_argument("--kind", choices=["personal", "team"], default="personal",
                   help="personal (one owner) or team (members) (default: personal)")
    p.add_argument("--policy", choices=["redact", "reject"], default=None,
                   help="what ingest does with a secret: redact it or reject the fact")
    add_json_flag(p)
    p.set_defaults(func=_run(bank_create))
    p = bank.add_parser("list", help="list banks")
    add_json_flag(p)
    p.set_defaults(func=_run(bank_list))
    p = bank.add_parser("policy", help="set a bank's redaction policy")
    p.add_argument("name", help="the bank's name")
    p.add_argument("policy", choices=["redact", "reject"],
                   help="redact: store the fact with the secret replaced; reject: refuse it")
    add_json_flag(p)
    p.set_defaults(func=_run(bank_policy))

    member = groups.add_parser("member", help="team members").add_subparsers(
        dest="action", required=True)
    p = member.add_parser("add", help="add a member to a bank")
    p.add_argument("bank", help="the team bank's name")
    p.add_argument("name", help="the member's name (e.g. their login)")
    add_json_flag(p)
    p.set_defaults(func=_run(member_add))

    token = groups.add_parser("token", help="issue, list, rotate, revoke").add_subparsers(
        dest="action", required=True)
    p = token.add_parser("issue", help="issue a token for a member (shown once)")
    p.add_argument("bank", help="the bank's name (`factbank admin bank list`)")
    p.add_argument("member", help="who the token is for (a member of the bank)")
    p.add_argument("--scopes", default="read,write", help="comma list of read,write,admin")
    p.add_argument("--label", default="", help="a note to tell tokens apart (e.g. laptop)")
    add_json_flag(p)
    p.set_defaults(func=_run(token_issue))
    p = token.add_parser("list", help="list tokens with last use")
    p.add_argument("bank", nargs="?", help="only this bank's tokens (default: all)")
    add_json_flag(p)
    p.set_defaults(func=_run(token_list))
    p = token.add_parser("revoke", help="revoke a token; it stops working at once")
    p.add_argument("id", type=int, help=TOKEN_ID_HELP)
    add_json_flag(p)
    p.set_defaults(func=_run(token_revoke))
    p = token.add_parser("rotate", help="revoke a token and issue its replacement")
    p.add_argument("id", type=int, help=TOKEN_ID_HELP)
    add_json_flag(p)
    p.set_defaults(func=_run(token_rotate))

    aud = groups.add_parser("audit", help="verify or export the audit chain").add_subparsers(
        dest="action", required=True)
    p = aud.add_parser("verify", help="check every hash link of the audit log and its heads "
                       "recorded outside the database")
    p.add_argument("--bank", default=None)
    p.add_argument("--head", default=None, metavar="FILE",
                   help="check against this head file (e.g. a backup's copy) instead of "
                   "FACTBANK_AUDIT_HEAD")
    add_json_flag(p)
    p.set_defaults(func=_run(audit_verify))
    p = aud.add_parser("export", help="write the audit log as JSONL or CSV")
    p.add_argument("--format", choices=["jsonl", "csv"], default="jsonl",
                   help="jsonl (default) or csv")
    p.add_argument("--bank", default=None)
    p.add_argument("--out", default="-", help="file (default stdout)")
    p.set_defaults(func=_run(audit_export))


@asynccontextmanager
async def _connection():
    from factbank.runtime.embedded import EmbeddedPostgres
    from factbank.settings import Settings
    from factbank.store import db

    settings = Settings.from_env()
    embedded = None
    dsn = settings.database_url
    if not dsn:
        embedded = EmbeddedPostgres(settings.home, settings.pg_shared_buffers)
        dsn = embedded.start()
    conn = await db.connect(dsn)
    try:
        yield conn
    finally:
        await conn.close()
        if embedded is not None:
            embedded.stop()


def _run(fn: Callable[[Any, Any], Awaitable[int | None]]) -> Callable[[Any], int]:
    def command(args) -> int:
        async def go() -> int:
            from factbank.settings import Settings
            from factbank.store import audit, banks

            settings = Settings.from_env()
            try:
                audit.configure(settings)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            async with _connection() as conn:
                try:
                    code = int(await fn(conn, args) or 0)
                except (banks.NotFound, banks.Conflict, ValueError) as exc:
                    raise CommandError(str(exc)) from exc
                # What the command appended to the log, its heads recorded outside it.
                await audit.Heads(settings.audit_head_path).seal(conn)
                return code

        return asyncio.run(go())

    return command


async def bank_create(conn, args) -> None:
    from factbank.store import banks

    bank = await banks.create_bank(conn, args.name, args.kind)
    if args.policy:
        await banks.set_redaction_policy(conn, args.name, args.policy)
    if args.json:
        print_json({**vars(bank), **({"redaction_policy": args.policy} if args.policy else {})})
        return
    print(f"created {bank.kind} bank '{bank.name}' (id {bank.id})")


async def bank_list(conn, args) -> None:
    from factbank.store import banks

    rows = [vars(b) for b in await banks.list_banks(conn)]
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["id", "name", "kind", "redaction_policy", "created_at"])


async def bank_policy(conn, args) -> None:
    from factbank.store import banks

    await banks.set_redaction_policy(conn, args.name, args.policy)
    if args.json:
        print_json({"bank": args.name, "redaction_policy": args.policy})
        return
    print(f"bank '{args.name}' now uses redaction policy '{args.policy}'")


async def member_add(conn, args) -> None:
    from factbank.store import banks

    member_id = await banks.add_member(conn, args.bank, args.name)
    if args.json:
        print_json({"bank": args.bank, "member": args.name, "id": member_id})
        return
    print(f"added member '{args.name}' to bank '{args.bank}' (id {member_id})")


def _show_token(info, token: str, as_json: bool) -> None:
    if as_json:
        print_json({**vars(info), "token": token})
        return
    print(f"token {info.id} for {info.member}@{info.bank} ({','.join(info.scopes)}).")
    print("It is shown only this once; store it now:\n")
    print(f"    {token}")


async def token_issue(conn, args) -> None:
    from factbank.store import banks

    info, token = await banks.issue_token(conn, args.bank, args.member, args.scopes, args.label)
    _show_token(info, token, args.json)


async def token_list(conn, args) -> None:
    from factbank.store import banks

    rows = [vars(t) for t in await banks.list_tokens(conn, args.bank)]
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["id", "bank", "member", "prefix", "scopes", "label", "created_at",
                           "last_used_at", "revoked_at"])


async def token_revoke(conn, args) -> None:
    from factbank.store import banks

    info = await banks.revoke_token(conn, args.id)
    if args.json:
        print_json(vars(info))
        return
    print(f"revoked token {info.id} ({info.prefix}... of {info.member}@{info.bank})")


async def token_rotate(conn, args) -> None:
    from factbank.store import banks

    info, token = await banks.rotate_token(conn, args.id)
    if not args.json:
        print(f"revoked token {args.id}; its replacement:")
    _show_token(info, token, args.json)


def _heads(args):
    from pathlib import Path

    from factbank.settings import Settings
    from factbank.store import audit

    path = Path(args.head) if getattr(args, "head", None) else Settings.from_env().audit_head_path
    return audit.Heads(path)


async def audit_verify(conn, args) -> int:
    from factbank.store import audit, banks

    bank_id = (await banks.get_bank(conn, args.bank)).id if args.bank else None
    heads = _heads(args)
    head = await heads.entry(conn)
    problems = await audit.verify(conn, bank_id, head)
    count = await audit.count(conn, bank_id)
    against = (f"against the heads in {heads.path}" if head else
               f"no heads recorded outside the database in {heads.path}: links and keyed "
               "hashes only")
    if args.json:
        print_json({"rows": count, "ok": not problems, "problems": [vars(p) for p in problems],
                    "head_file": str(heads.path), "heads": (head or {}).get("chains")})
    elif problems:
        for p in problems:
            print(f"audit row {p.audit_id} (bank {p.bank_id}): {p.what}")
        print(f"audit chain BROKEN: {len(problems)} problem(s) in {count} rows ({against})")
    else:
        print(f"audit chain ok: {count} rows verified ({against})")
    return 1 if problems else 0


async def audit_export(conn, args) -> None:
    from factbank.store import audit, banks

    bank_id = (await banks.get_bank(conn, args.bank)).id if args.bank else None
    chains = ((await _heads(args).entry(conn)) or {}).get("chains") or {}
    if bank_id is not None:
        chains = {k: v for k, v in chains.items() if k == str(bank_id)}
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8", newline="")  # noqa: ASYNC230
    try:
        writer = None
        async for row in audit.rows(conn, bank_id):
            record = audit.export_record(row)
            if args.format == "jsonl":
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                continue
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(record))
                writer.writeheader()
            writer.writerow({**record, "detail": json.dumps(record["detail"], ensure_ascii=False)})
        # The heads recorded outside the database go with every export: JSONL's last line;
        # beside a CSV file (<out>.head.json), or on stderr for a CSV on stdout.
        head = json.dumps({"audit_head": chains}, ensure_ascii=False)
        if args.format == "jsonl":
            out.write(head + "\n")
        elif args.out == "-":
            print(head, file=sys.stderr)
        else:
            with open(args.out + ".head.json", "w", encoding="utf-8") as f:  # noqa: ASYNC230
                f.write(head + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
