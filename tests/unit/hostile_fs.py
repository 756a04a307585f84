"""The hostile file system every client reader and writer is run against (one
table each), and the real git repository they are run in.

`layout(tmp_path)` builds: a repository `repo/` (one commit, `docs/ok.txt` tracked, an in-repo
link `okl.txt -> docs/ok.txt`, committed links `link.txt -> ../private/notes.txt` and `linkdir
-> ../private`, a secret in `.git/config`, an ignored `.env`), a private folder next to it
(`private/notes.txt`, also $HOME), and `elsewhere/repolink -> ../repo` (the root reached
through a link of its own). Every secret line holds SECRET: whatever a reader returns or
sends must never contain it.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SECRET = "SECRET-7c1e"
SECRET_LINE = f"{SECRET} the private note"
OK_LINE = "The API listens on port 8443"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **GIT_ENV}).stdout.strip()


@dataclass
class Layout:
    tmp: Path
    repo: Path
    private: Path  # the folder outside the repository (and $HOME)
    notes: Path  # private/notes.txt, line 2 is SECRET_LINE

    def snapshot(self) -> dict[str, bytes]:
        """Every file outside the repository, to prove none was written."""
        out = {}
        for path in sorted(self.tmp.rglob("*")):
            if path.is_file() and not path.is_symlink() and self.repo not in path.parents:
                out[str(path)] = path.read_bytes()
        return out


def layout(tmp_path: Path) -> Layout:
    repo, private = tmp_path / "repo", tmp_path / "private"
    private.mkdir()
    notes = private / "notes.txt"
    notes.write_text(f"alpha\n{SECRET_LINE}\nomega\n")
    (repo / "docs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "docs" / "ok.txt").write_text(f"first\n{OK_LINE}\nlast\n")
    (repo / "CLAUDE.md").write_text(f"- {OK_LINE}.\n")
    (repo / "okl.txt").symlink_to("docs/ok.txt")
    (repo / "link.txt").symlink_to("../private/notes.txt")
    (repo / "linkdir").symlink_to("../private")
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text(f"TOKEN={SECRET}\n{SECRET_LINE}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(f'[remote "origin"]\n\turl = https://u:{SECRET}@example.com/r.git\n')
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "repolink").symlink_to("../repo")
    # ../private from the root reached through `elsewhere/repolink` lexically
    (tmp_path / "elsewhere" / "private").mkdir()
    (tmp_path / "elsewhere" / "private" / "notes.txt").write_text(f"x\n{SECRET_LINE}\n")
    return Layout(tmp_path, repo, private, notes)


def hostile(lay: Layout) -> dict[str, str]:
    """The table of hostile locations (as a bank's `source.location` or a typed path; each
    names line 2, which would be SECRET_LINE if read)."""
    return {
        "dotdot": "../private/notes.txt:2",
        "absolute": f"{lay.notes}:2",
        "home": "~/notes.txt:2",
        "link_file_out": "link.txt:2",
        "link_dir_out": "linkdir/notes.txt:2",
        "dotdot_in_middle": "docs/../../private/notes.txt:2",
        "windows": "..\\private\\notes.txt:2",
        "url_encoded": "..%2fprivate%2fnotes.txt:2",
        "nul": "docs/ok.txt\0/../../../private/notes.txt:2",
        "very_long": "docs/" + "./" * 3000 + "../../private/notes.txt:2",
        "long_name": "x" * 300 + "/../../private/notes.txt:2",
        "git_config": ".git/config:2",
        "git_config_case": ".GIT/config:2",
        "ignored_env": ".env:2",
    }


HOSTILE_IDS = ["dotdot", "absolute", "home", "link_file_out", "link_dir_out",
               "dotdot_in_middle", "windows", "url_encoded", "nul", "very_long", "long_name",
               "git_config", "git_config_case", "ignored_env"]

# Readers that read only what a person typed may read a git-ignored file (the person chose
# it); readers of a bank's location may not.
USER_CHOSEN_OK = {"ignored_env"}


def positive(lay: Layout) -> dict[str, str]:
    """Locations every reader must still read (so refusing everything cannot pass)."""
    return {"plain": "docs/ok.txt:2", "in_repo_link": "okl.txt:2",
            "absolute_inside": f"{lay.repo / 'docs' / 'ok.txt'}:2",
            "dotdot_inside": "docs/../docs/ok.txt:2"}


POSITIVE_IDS = ["plain", "in_repo_link", "absolute_inside", "dotdot_inside"]


def secret_free(*things: object) -> bool:
    return all(SECRET not in repr(t) for t in things)
