"""The client's two file rules (A1-A3): what a bank or a repository names is read
only from inside the repository, and what factbank writes is never written through a link.

Reading (`inside`, `read`, `is_file`). A fact's location comes from a teammate (or from an
agent, or from a file committed to the repository), so every reader that turns one into a
file read (`verify`, the quote check of `add`/`supersede`/`confirm`, fingerprints,
`migrate-native`, `rules propose`, the dashboard's report files) goes through `read`:

* the path is refused before anything is opened when it holds a NUL byte, is longer than
  MAX_PATH bytes (or a name longer than MAX_NAME), starts with `~`, or holds a backslash (a
  Windows `..\\`);
* it is joined to `base` (the repository root for a bank's location; the user's directory for
  a path the user typed), resolved with every symbolic link followed, and refused unless the
  real path is inside the repository root's real path: `../x`, `a/../../x`, an absolute path
  elsewhere, a link (file or directory, committed or planted) that leaves the root. Links that
  stay inside the root are fine, and so is reaching the root through a link of its own
  (`/tmp -> /private/tmp`), because both sides are compared as real paths. A real path in
  git's own directory is refused too (`.git/config` may hold a remote's token);
* the file is then opened one real component at a time from the root's directory descriptor
  with O_NOFOLLOW, so a link swapped in after the check is refused rather than followed, and
  only a regular file is read (O_NONBLOCK: a FIFO never blocks a hook), at most MAX_READ bytes.

Writing (`write`, `delete`). Every file the installers write (hooks, harness settings, the
install manifest, Codex trust, the config, a rule patch, native backups, hook state and the
timeline's pending file) goes through `write`: a new temp file with a random name in the
target's directory, created O_CREAT|O_EXCL|O_NOFOLLOW 0600 (no planted name can be followed,
no existing file inherited), given its final mode before any byte is written, then renamed
over the target (rename replaces a directory entry; it never writes through one). A target
that is a symbolic link (dangling or not) or not a regular file is refused: factbank writes
neither through a link nor over it. `delete` removes a file only when its bytes are still
the ones the caller proves it wrote.
"""

from __future__ import annotations

import errno
import os
import stat

from factbank_client.errors import UnsafePath

TYPE_CHECKING = False  # not `typing`'s: the hooks import this module and never load typing
if TYPE_CHECKING:  # pathlib is imported where a Path is returned: hooks import this module
    from pathlib import Path

MAX_PATH = 4096  # bytes: PATH_MAX on Linux; longer is refused before the kernel says so
MAX_NAME = 255  # bytes in one name (NAME_MAX)
MAX_READ = 32 * 1024 * 1024  # a cited source file larger than this is refused, not loaded
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _shown(text: str) -> str:
    text = text.replace("\0", "\\0")
    return text if len(text) <= 120 else text[:117] + "..."


def _check_text(text: str) -> None:
    shown = _shown(text)
    if not text:
        raise UnsafePath("an empty path")
    if "\0" in text:
        raise UnsafePath(f"{shown}: a NUL byte in the path")
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_PATH or any(len(p) > MAX_NAME for p in raw.split(b"/")):
        raise UnsafePath(f"{shown}: the path is too long")
    if text.startswith("~"):
        raise UnsafePath(f"{shown}: a home-relative path; only files inside the repository "
                         "are read")
    if "\\" in text:
        raise UnsafePath(f"{shown}: a backslash in the path (a Windows separator?)")


def inside(root: str | Path, path: str | Path, *, base: str | Path | None = None) -> Path:
    """The real path of `path` (relative to `base`, default `root`; absolute as given), when
    it is inside `root`'s real path and not in its `.git`. UnsafePath otherwise."""
    from pathlib import Path

    return Path(_inside(root, path, base))


def _inside(root: str | Path, path: str | Path, base: str | Path | None) -> str:
    """`inside` as a string: the hooks' working-tree check reads files through `read_bytes`
    and never loads pathlib (14.5 ms of CPU in a fresh `python -I -S`, config.py)."""
    text = os.fspath(path)
    _check_text(text)
    real_root = os.path.realpath(root)
    joined = os.path.join(os.fspath(base) if base is not None else real_root, text)
    real = os.path.realpath(joined)
    rel = os.path.relpath(real, real_root)
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        raise UnsafePath(f"{_shown(text)} is outside the repository ({real_root})")
    if any(p.casefold() == ".git" for p in rel.split(os.sep)):
        raise UnsafePath(f"{_shown(text)} leads into git's own directory")
    return real


def _open_inside(real_root: str, rel_parts: tuple[str, ...]) -> int:
    """An fd of root/rel_parts, opened component by component without following links."""
    fd = os.open(real_root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in rel_parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(rel_parts[-1], os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC,
                       dir_fd=fd)
    finally:
        os.close(fd)


def read(root: str | Path, path: str | Path, *, base: str | Path | None = None,
         limit: int = MAX_READ) -> tuple[Path, bytes]:
    """(the real path, its bytes) of a regular file inside `root` (see `inside`).
    FileNotFoundError when it is not there; UnsafePath when it may not be read."""
    from pathlib import Path

    real, data = _read(root, path, base, limit)
    return Path(real), data


def read_bytes(root: str | Path, path: str | Path, *, base: str | Path | None = None,
               limit: int = MAX_READ) -> bytes:
    """`read(...)[1]`, without pathlib (the hooks', `_inside`)."""
    return _read(root, path, base, limit)[1]


def _read(root: str | Path, path: str | Path, base: str | Path | None,
          limit: int) -> tuple[str, bytes]:
    real = _inside(root, path, base)
    real_root = os.path.realpath(root)
    rel = os.path.relpath(real, real_root)
    parts = tuple(rel.split(os.sep))
    if rel == ".":
        raise UnsafePath(f"{_shown(os.fspath(path))} is the repository itself, not a file")
    try:
        fd = _open_inside(real_root, parts)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafePath(f"{_shown(os.fspath(path))}: a link changed while it was "
                             "opened") from None
        if exc.errno == errno.ENOTDIR:  # a file where a directory was expected: not there
            raise FileNotFoundError(errno.ENOENT, "not a directory on the way", str(path)) \
                from None
        if exc.errno == errno.ENAMETOOLONG:
            raise UnsafePath(f"{_shown(os.fspath(path))}: the path is too long") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{_shown(os.fspath(path))} is not a regular file")
        if st.st_size > limit:
            raise UnsafePath(f"{_shown(os.fspath(path))} is larger than {limit} bytes")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:
                raise UnsafePath(f"{_shown(os.fspath(path))} is larger than {limit} bytes")
            chunks.append(chunk)
        return real, b"".join(chunks)
    finally:
        os.close(fd)


def is_file(root: str | Path, path: str | Path, *, base: str | Path | None = None) -> bool:
    """Whether `path` is a regular file `read` may read (refused paths are not files)."""
    try:
        return stat.S_ISREG(os.stat(inside(root, path, base=base)).st_mode)
    except (UnsafePath, OSError):
        return False


# --- writing ----------------------------------------------------------------------------------


def _target_stat(path: str) -> os.stat_result | None:
    """lstat of a target we may replace: None when absent; UnsafePath for a link (dangling or
    not) or anything but a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        raise UnsafePath(f"{path} is a symbolic link (to {to}): factbank writes neither "
                         "through a link nor over it; replace it with a file, or remove it")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(f"{path} exists and is not a regular file")
    return st


def read_own(path: str | Path) -> bytes | None:
    """The bytes of a file factbank is about to edit or replace, or None when there is none;
    UnsafePath for a link or a non-regular file (never read through)."""
    path = os.fspath(path)
    if _target_stat(path) is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path} became a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def new_temp(path: str | Path) -> tuple[str, int]:
    """A new temp file beside `path` (random name, O_EXCL|O_NOFOLLOW, 0600): never an
    existing file or a planted link. Returns (its path, a writable fd)."""
    head, name = os.path.split(os.fspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    while True:
        tmp = os.path.join(head, f".{name[:200]}.{os.urandom(6).hex()}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue


def write(path: str | Path, data: bytes | str, *, mode: int | None = None,
          private: bool = False) -> None:
    """Atomically make `path` a regular file holding `data`. Its mode: 0600 when `private`,
    else `mode`, else the existing file's, else the umask's. The temp file has that mode
    before any byte is in it. UnsafePath when `path` is a link or not a regular file."""
    path = os.fspath(path)
    st = _target_stat(path)
    if private:
        final = 0o600
    elif mode is not None:
        final = mode
    elif st is not None:
        final = stat.S_IMODE(st.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        final = 0o666 & ~umask
    if isinstance(data, str):
        data = data.encode("utf-8")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp, fd = new_temp(path)
    try:
        try:
            if final != 0o600:
                os.fchmod(fd, final)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        _target_stat(path)  # a link planted while we wrote is refused, not replaced
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def delete(path: str | Path, expected: bytes | str) -> bool:
    """Remove `path` only when it is a regular file holding exactly `expected` (what the
    caller wrote); True when removed, False when absent or not ours (then left alone)."""
    if isinstance(expected, str):
        expected = expected.encode("utf-8")
    try:
        current = read_own(path)
    except UnsafePath:
        return False
    if current is None or current != expected:
        return False
    os.unlink(path)
    return True
