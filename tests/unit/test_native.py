"""migrate-native's reading of a harness's memory files (factbank_client/native.py): which
lines are memories (candidate facts), which are rules (left alone), which are neither."""

from __future__ import annotations

from pathlib import Path

from factbank_client import native

TEXT = """---
name: notes
type: project
---
# Project notes

- The staging API listens on port 8443.
- Use pnpm, never npm.
* Never push to main directly.
1. The deploy runs from the ops host.
- [x] The cache is Redis 7.
You must run the migrations first.
Tests should pass before a merge.
- 缓存服务部署在上海机房的第二台机器上。
- 不要直接推送到主分支。
- 请先运行迁移脚本再启动服务。
| table | row |
> a quote block line here
<!-- factbank:begin (managed by `factbank install`; edits inside are replaced) -->
The factbank block says things about facts.
<!-- factbank:end -->
```sh
the build runs make test here
```
Short line.
"""


def test_memories_rules_and_neither():
    got = native.classify(TEXT)
    facts = [(n, t) for n, k, t in got if k == "fact"]
    rules = [(n, t) for n, k, t in got if k == "rule"]
    assert facts == [(7, "The staging API listens on port 8443."),
                     (10, "The deploy runs from the ops host."),
                     (11, "The cache is Redis 7."),
                     (14, "缓存服务部署在上海机房的第二台机器上。")]
    assert rules == [(8, "Use pnpm, never npm."), (9, "Never push to main directly."),
                     (12, "You must run the migrations first."),
                     (13, "Tests should pass before a merge."),
                     (15, "不要直接推送到主分支。"), (16, "请先运行迁移脚本再启动服务。")]


def test_each_harness_reads_its_own_files(tmp_path: Path, monkeypatch):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".claude").mkdir()
    for name in ("CLAUDE.md", "AGENTS.md", "AGENTS.override.md", ".claude/CLAUDE.md"):
        (root / name).write_text("- The API listens on port 8443.\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    mem = native.claude_memory_dir(root)
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- The worker pool has four threads.\n")
    rel = {h: [p.relative_to(tmp_path).as_posix() for p in native.sources(h, root)]
           for h in ("claude", "codex", "pi")}
    assert rel["claude"][:2] == ["repo/CLAUDE.md", "repo/.claude/CLAUDE.md"]
    assert rel["claude"][2].endswith("/memory/MEMORY.md")
    assert rel["codex"] == ["repo/AGENTS.md", "repo/AGENTS.override.md"]
    assert rel["pi"] == ["repo/AGENTS.md", "repo/CLAUDE.md"]
    # Claude Code names a project's folder by its path, every non-alphanumeric as "-"
    assert mem.parent.name == "".join(c if c.isalnum() else "-" for c in str(root.resolve()))
