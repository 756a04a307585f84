"""The timeline of a project: what just happened, on any machine, in any harness.

Sessions, file touches, commands, session start/end, handoffs and conflicts, per bank and
project key. Every text is redacted (`redaction.clean_fields`, i.e. `redact_fields` under the
bank's policy: clean.py) before it is stored. Nothing here ever becomes a fact: these rows are
not embedded, indexed, recalled or injected as facts (docs/principles.md#write-gate).

Conflicts (conflicts.py, worded in wording.py): a file event whose path another session touched
in the same project within the window (default 30 minutes, `Settings.conflict_window_minutes`)
is a conflict. "Another session" is any other session key: another agent, member or machine, or
a second window of the same agent. The warning names the file, who, which agent, how long ago
and the branch, and says when the branches differ. Each conflict is recorded on the timeline
(kind `conflict`).

Handoffs (handoffs.py): a note for the next session start in the project (any, or one named
agent and/or member); it is delivered once and marked delivered.

The modules, each one job: models (what a client sends), clean (redaction), wording (a
conflict and its warning), sessions (session rows), conflicts, handoffs, and events (a batch
stored, the timeline listed and trimmed).
"""
