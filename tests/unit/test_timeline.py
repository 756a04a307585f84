"""Timeline rules that need no database: durations, warnings, paths, clocks, event shapes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from factbank.timeline import clean, events, models, wording
from factbank_client.cli.main import build_parser
from factbank_client.cli.timeline import relative_to_repo

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - timedelta(minutes=30)),
        ("2h", NOW - timedelta(hours=2)),
        ("3d", NOW - timedelta(days=3)),
        ("1w", NOW - timedelta(weeks=1)),
        ("45s", NOW - timedelta(seconds=45)),
        ("2026-11-30T08:00:00", datetime(2026, 11, 30, 8, tzinfo=UTC)),
        ("2026-11-30T08:00:00+02:00", datetime(2026, 11, 30, 6, tzinfo=UTC)),
        ("", None),
        (None, None),
    ],
)
def test_parse_since(text, expected):
    assert events.parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2x", "h", "-2h", "2.5h"])
def test_parse_since_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError, match="duration"):
        events.parse_since(text, NOW)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s ago"), (59, "59s ago"), (60, "1 min ago"), (1799, "29 min ago"),
     (1801, "30 min ago"), (3600, "1 h ago"), (90000, "1 d ago"), (-5, "0s ago")],
)
def test_ago(seconds, text):
    assert wording.ago(seconds) == text


def _conflict(**over) -> wording.Conflict:
    base = dict(path="src/app.py", member="bob", agent="codex", machine="desk",
                branch="main", other_branch=False, seconds_ago=125, session="cx")
    base.update(over)
    return wording.Conflict(**base)


def test_the_warning_names_file_who_agent_when_and_branch():
    assert _conflict().warning() == (
        "src/app.py was also touched by bob with codex on desk 2 min ago (branch main)")


def test_a_different_branch_is_marked_in_the_warning():
    text = _conflict(branch="feature/x", other_branch=True).warning()
    assert text.endswith("(a DIFFERENT branch: feature/x)")


def test_a_warning_without_details_still_reads():
    text = _conflict(member="", agent="", machine="", branch="").warning()
    assert text == "src/app.py was also touched by someone with an agent 2 min ago (branch ?)"


@pytest.mark.parametrize(
    ("given", "stored"),
    [("./src/a.py", "src/a.py"), ("././b.py", "b.py"), ("src\\win.py", "src/win.py"),
     (" c.py ", "c.py"), (None, None)],
)
def test_paths_are_stored_relative_and_with_slashes(given, stored):
    assert clean.rel_path(given) == stored


def test_a_future_time_from_a_skewed_clock_is_now_and_a_past_one_is_kept():
    now = datetime.now(UTC)
    assert events._when(now + timedelta(hours=1), now) == now
    assert events._when(now + timedelta(seconds=30), now) == now + timedelta(seconds=30)
    past = now - timedelta(minutes=29, seconds=59)
    assert events._when(past, now) == past
    assert events._when(None, now) == now
    naive = datetime(2026, 12, 1, 11, 0)
    assert events._when(naive, now).tzinfo is UTC


def test_event_shapes_are_strict():
    decode = msgspec.json.decode
    e = decode(b'{"session_id": "s", "kind": "command", "command": "ls", "exit_code": 2}',
               type=models.NewEvent)
    assert e.exit_code == 2
    for bad in (b'{"session_id": "s", "kind": "chat"}',
                b'{"session_id": "s", "kind": "file", "content": "a conversation"}',
                b'{"session_id": "", "kind": "file"}',
                b'{"session_id": "s", "kind": "command", "exit_code": 4294967296}'):
        with pytest.raises(msgspec.ValidationError):
            decode(bad, type=models.NewEvent)
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"events": []}', type=models.EventBatch)


def test_settings_default_to_30_days_and_30_minutes(monkeypatch):
    from factbank.settings import Settings
    from factbank.settings import table as settings_table

    s = Settings()
    assert s.timeline_retention_days == 30 and s.conflict_window_minutes == 30
    monkeypatch.setenv("FACTBANK_CONFLICT_WINDOW_MINUTES", "10")
    monkeypatch.setenv("FACTBANK_TIMELINE_RETENTION_DAYS", "7")
    s = Settings.from_env()
    assert s.conflict_window_minutes == 10 and s.timeline_retention_days == 7
    shown = settings_table()
    assert "`FACTBANK_CONFLICT_WINDOW_MINUTES` | `30`" in shown
    assert "`FACTBANK_TIMELINE_RETENTION_DAYS` | `30`" in shown


def test_relative_to_repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    assert relative_to_repo("app.py", tmp_path / "src") == "src/app.py"
    assert relative_to_repo("../README.md", tmp_path / "src") == "README.md"
    outside = tmp_path.parent / "elsewhere.txt"
    assert relative_to_repo(str(outside), tmp_path) == str(outside)


def test_the_commands_are_registered():
    parser = build_parser()
    args = parser.parse_args(["handoff", "note", "--to", "codex", "--file", "a.py", "--file",
                              "b.py", "--fact", "3"])
    assert args.to_agent == "codex" and args.files == ["a.py", "b.py"] and args.facts == [3]
    args = parser.parse_args(["timeline", "--since", "2h", "--json"])
    assert args.since == "2h" and args.json
