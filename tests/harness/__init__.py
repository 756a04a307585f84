"""End-to-end harness infrastructure: real Claude Code, Codex and Pi against a fake model."""
