"""Run directories: a private temporary directory per run (`distcheck-<kind>-<owner pid>-XXXX`) holding a
lock its owner keeps while the run lasts, and the sweep that removes those whose owner is gone (lock
free, or no lock and older than a minute). No torch."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time

__all__ = ["RunDir", "make_run_dir", "run_dirs_of", "sweep_run_dirs"]

_RUN_DIR = re.compile(r"^distcheck-(?:run|ref)-(\d+)-")
_LOCK = "owner.lock"
_YOUNG_S = 60.0  # a run directory without its lock file this young may be one being created


class RunDir:
    """A private temporary directory for one run, locked by its owner while the run lasts."""

    def __init__(self, kind: str) -> None:
        sweep_run_dirs()
        self.path = tempfile.mkdtemp(prefix=f"distcheck-{kind}-{os.getpid()}-")
        # Locked under another name, then renamed: a sweep never sees the lock file unlocked while its
        # owner lives.
        pending = os.path.join(self.path, _LOCK + ".new")
        self._lock_fd: int | None = os.open(pending, os.O_WRONLY | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        os.rename(pending, os.path.join(self.path, _LOCK))

    def remove(self) -> None:
        """Delete the directory (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None


def make_run_dir(kind: str) -> RunDir:
    """`RunDir(kind)`: sweep stale run directories, then make a fresh one named after this process."""
    return RunDir(kind)


def sweep_run_dirs(owner: int | None = None, tmpdir: str | None = None) -> list[str]:
    """Remove distcheck run directories (of `owner` only, when given) whose owner is gone: their lock is
    free, or they have no lock and are older than a minute. Returns the removed paths."""
    base = tmpdir or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = os.listdir(base)
    except OSError:
        return removed
    uid = os.getuid()
    for name in entries:
        m = _RUN_DIR.match(name)
        if not m or (owner is not None and int(m.group(1)) != owner):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != uid or not os.path.isdir(path) or os.path.islink(path):
            continue
        if _stale(path, st.st_mtime):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _stale(path: str, mtime: float) -> bool:
    try:
        fd = os.open(os.path.join(path, _LOCK), os.O_RDONLY)
    except OSError:
        return time.time() - mtime > _YOUNG_S
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # its owner still holds it
    finally:
        os.close(fd)  # releases the lock taken just above
    return True


def run_dirs_of(owner: int) -> list[str]:
    """The names of `owner`'s run directories in the temporary directory."""
    base = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        return [n for n in os.listdir(base) if (m := _RUN_DIR.match(n)) and int(m.group(1)) == owner]
    return []
