"""`factbank import-history claude|codex|pi`: the timeline backfilled from local transcripts.

Reads the harness's own session files (factbank_client.history: one reader per format, each
from what the real harness writes), and sends sessions, file touches and commands to the
timeline, 500 events a request. Never conversation text. The server redacts every string and
stores each event once (its key: the tool call's id, as the hooks give it), so running it
again, or after the hooks recorded the same sessions, adds nothing.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime, timedelta

from factbank_client.cli import common
from factbank_client.cli.common import command
from factbank_client.errors import FactbankError
from factbank_client.history import HARNESSES, module, parse_time
from factbank_common.commands import CommandError
from factbank_common.output import print_json

BATCH = 500
DEFAULT_DAYS = 30  # the server keeps 30 days by default: older events are not stored


def register(sub) -> None:
    with command(
        sub, "import-history", cmd_import_history,
        help="backfill the timeline from local Claude Code, Codex or Pi sessions",
        description="Read the local session files of one harness (Claude Code's "
        "~/.claude/projects/*/*.jsonl, Codex's ~/.codex/sessions/**/rollout-*.jsonl, Pi's "
        "~/.pi/agent/sessions/*/*.jsonl) and add their sessions, file touches and commands "
        "(with exit codes) to the timeline, with the project key of each session's working "
        "directory. Conversation text is never read into it. The server redacts every "
        "string; each event is stored once, so running it again adds nothing. A session "
        "written to in the last 5 minutes may still be running: its end is not recorded.") as p:
        p.add_argument("harness", choices=HARNESSES,
                       help="whose transcripts to read: claude, codex or pi")
        p.add_argument("--since", help=f"only sessions and events since this date or time "
                                       f"(ISO, e.g. 2026-11-01) or duration (7d, 12h); default "
                                       f"{DEFAULT_DAYS}d, what the timeline keeps")
        p.add_argument("--dry-run", action="store_true", help="read and count, send nothing")
        p.add_argument("--dir", help="the harness's home to read (default ~/.claude, ~/.codex "
                                     "or ~/.pi/agent, or $CLAUDE_CONFIG_DIR, $CODEX_HOME, "
                                     "$PI_CODING_AGENT_DIR)")
        p.add_argument("--bank",
                       help="bank label (default: team if configured, else personal)")


def since_time(text: str | None, now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    if not text:
        return now - timedelta(days=DEFAULT_DAYS)
    units = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
    t = text.strip()
    if len(t) >= 2 and t[-1].lower() in units and t[:-1].isdigit():
        return now - timedelta(seconds=int(t[:-1]) * units[t[-1].lower()])
    at = parse_time(t)
    if at is None:
        raise CommandError(f"--since: {text!r} is neither a date/time (2026-11-01) nor a "
                           "duration (7d, 12h)")
    return at


def _read(harness: str, root: str | None, since: datetime, show: bool) -> tuple[list, int]:
    from tqdm import tqdm

    reader = module(harness)
    paths = [p for p in reader.files(root) if _mtime(p) >= since.timestamp()]
    events: list[dict] = []
    for path in tqdm(paths, unit="file", desc="read", file=sys.stderr, disable=not show):
        try:
            found = reader.read(path)
        except (OSError, UnicodeDecodeError) as exc:
            print(f"factbank: skipped {path}: {exc}", file=sys.stderr)
            continue
        events += [e for e in found if (parse_time(e.get("at")) or since) >= since]
    return events, len(paths)


def _mtime(path: str) -> float:
    import os

    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _send(events: list[dict], bank: str | None, show: bool) -> dict:
    from tqdm import tqdm

    totals = {"recorded": 0, "duplicates": 0, "bank": bank}
    with common.client() as client, tqdm(
            total=len(events), unit="event", desc="send", file=sys.stderr,
            disable=not show) as bar:
        for i in range(0, len(events), BATCH):
            batch = events[i:i + BATCH]
            try:
                out = client.record_events(batch, bank=bank, timeout=120.0)
            except FactbankError as exc:
                done = f" ({totals['recorded']} events sent before it; run it again: " \
                       "what is stored is skipped)" if i else ""
                raise CommandError(f"import-history refused: {exc}{done}") from None
            totals["recorded"] += int(out.get("recorded") or 0)
            totals["duplicates"] += int(out.get("duplicates") or 0)
            totals["bank"] = out.get("bank", bank)
            bar.update(len(batch))
    return totals


def cmd_import_history(args) -> int:
    since = since_time(args.since)
    show = not args.json and sys.stderr.isatty()
    events, files = _read(args.harness, args.dir, since, show)
    sessions = {e["session_id"] for e in events}
    projects = Counter(e.get("project") or "(no repository)" for e in events
                       if e["kind"] == "session_start")
    kinds = Counter(e["kind"] for e in events)
    summary = {"harness": args.harness, "since": since.isoformat(), "files": files,
               "sessions": len(sessions), "events": len(events), "kinds": dict(kinds),
               "projects": dict(projects), "dry_run": args.dry_run}
    if events and not args.dry_run:
        summary.update(_send(events, args.bank, show))
        summary["older_than_kept"] = len(events) - summary["recorded"] - summary["duplicates"]
    if args.json:
        print_json(summary)
        return 0
    what = ", ".join(f"{kinds[k]} {k.replace('_', ' ')}" for k in
                     ("session_start", "file", "command", "session_end") if kinds[k])
    print(f"{args.harness}: {files} transcript files since {since:%Y-%m-%d %H:%M}, "
          f"{len(sessions)} sessions, {len(events)} events" + (f" ({what})" if what else ""))
    for project, n in projects.most_common():
        print(f"  {project}: {n} session{'s' if n != 1 else ''}")
    if args.dry_run:
        print("dry run: nothing sent")
    elif events:
        print(f"sent to the {summary['bank']} bank: {summary['recorded']} added, "
              f"{summary['duplicates']} already on the timeline"
              + (f", {summary['older_than_kept']} older than the timeline keeps"
                 if summary["older_than_kept"] else ""))
    return 0
