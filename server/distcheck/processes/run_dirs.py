"""Run directories: a private temporary directory per run (`distcheck-<kind>-<owner pid>-XXXX`) holding a
lock its owner keeps while the run lasts, and the sweep that removes those whose owner is gone (lock
free, or no lock and older than a minute).

Kinds: `run` (a distributed run's files), `ref` (the reference run's), and `mp` (`distcheck-mp-<pid>`,
no random part: a Unix socket's path is short), multiprocessing's temporary directory of the owner
(`multiprocessing_dir`), where its forkserver's socket lives: one per owner for its whole life, so
that it is swept like the others once the owner is gone, however it died (the forkserver, the
editor's daemon for its runner, or the next run's sweep removes it). No torch."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
import time

__all__ = ["RunDir", "make_run_dir", "multiprocessing_dir", "remove_own_run_dirs", "run_dirs_of", "sweep_run_dirs"]

_RUN_DIR = re.compile(r"^distcheck-(?:run|ref|mp)-(\d+)(?:-|$)")
_LOCK = "owner.lock"
_YOUNG_S = 60.0  # a run directory without its lock file this young may be one being created
_REMOVE_S = 2.0  # how long `RunDir.remove` tries again while something still writes into the directory


class RunDir:
    """A private temporary directory for one run, locked by its owner while the run lasts."""

    def __init__(self, kind: str, *, unique: bool = False) -> None:
        """`unique`: named `distcheck-<kind>-<pid>` with no random part, the one of its kind this
        process has (a stale one of a dead process of that pid is replaced; OSError when it cannot)."""
        sweep_run_dirs()
        if unique:
            self.path = os.path.join(tempfile.gettempdir(), f"distcheck-{kind}-{os.getpid()}")
            if os.path.lexists(self.path) and _ours(self.path):
                shutil.rmtree(self.path, ignore_errors=True)  # ours, named after this pid: a dead process's
            os.mkdir(self.path, 0o700)
        else:
            self.path = tempfile.mkdtemp(prefix=f"distcheck-{kind}-{os.getpid()}-")
        self._lock_fd: int | None = None
        try:
            # Locked under another name, then renamed: a sweep never sees the lock file unlocked while
            # its owner lives.
            pending = os.path.join(self.path, _LOCK + ".new")
            self._lock_fd = os.open(pending, os.O_WRONLY | os.O_CREAT, 0o600)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            os.rename(pending, os.path.join(self.path, _LOCK))
        except BaseException:  # interrupted (a stop signal) or failed half-made: nobody else would remove it
            self.remove()
            raise

    def remove(self) -> None:
        """Delete the directory (idempotent). A process being killed may still write into it for a
        moment (a child whose start was interrupted, so that its pid is unknown here), so the removal is
        tried again for up to `_REMOVE_S` seconds while the directory is still there."""
        deadline = time.monotonic() + _REMOVE_S
        while True:
            shutil.rmtree(self.path, ignore_errors=True)
            if not os.path.lexists(self.path) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None


def make_run_dir(kind: str) -> RunDir:
    """`RunDir(kind)`: sweep stale run directories, then make a fresh one named after this process."""
    return RunDir(kind)


_MULTIPROCESSING: list[RunDir] = []


_SOCKET_NAME = len("/listener-12345678")
"""What multiprocessing appends to its temporary directory for the forkserver's socket."""
_SUN_PATH = 107
"""The longest path a Unix socket may have (Linux: 108 bytes with the terminating NUL)."""


def multiprocessing_dir() -> str | None:
    """multiprocessing's temporary directory for this process (its forkserver's socket goes there),
    made the run directory `distcheck-mp-<pid>` when multiprocessing has none yet, before this process
    starts its forkserver. Removed when this process exits, as multiprocessing removes its own (an exit
    finalizer, after every other), and by a sweep once this process is gone. The directory
    multiprocessing already has, if any, else None when no such run directory can be made here (or
    its socket's path would be too long): multiprocessing then makes its own `pymp-*` directory."""
    from multiprocessing import process, util

    config: dict[str, object] = process.current_process()._config  # type: ignore[attr-defined]
    current = config.get("tempdir")
    if isinstance(current, str):
        return current
    try:
        made = RunDir("mp", unique=True)
    except OSError:
        return None
    if len(os.fsencode(made.path)) + _SOCKET_NAME > _SUN_PATH:
        made.remove()
        return None
    _MULTIPROCESSING.append(made)
    config["tempdir"] = made.path
    util.Finalize(None, made.remove, exitpriority=-100)
    return made.path


def remove_own_run_dirs() -> list[str]:
    """Remove every run directory named after this process, its locks held or not: for a process that
    is about to exit without its exit handlers (`os._exit`), its runs over. Returns the removed paths."""
    base = tempfile.gettempdir()
    removed = []
    for name in run_dirs_of(os.getpid()):
        path = os.path.join(base, name)
        if _ours(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _ours(path: str) -> bool:
    """Whether `path` is a directory (not a link to one) of this user's."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and stat.S_ISDIR(st.st_mode)


def sweep_run_dirs(owner: int | None = None, tmpdir: str | None = None) -> list[str]:
    """Remove distcheck run directories (of `owner` only, when given) whose owner is gone: their lock is
    free, or they have no lock and are older than a minute. Returns the removed paths."""
    base = tmpdir or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = os.listdir(base)
    except OSError:
        return removed
    for name in entries:
        m = _RUN_DIR.match(name)
        if not m or (owner is not None and int(m.group(1)) != owner):
            continue
        path = os.path.join(base, name)
        if not _ours(path):
            continue
        try:
            mtime = os.lstat(path).st_mtime
        except OSError:
            continue
        if _stale(path, mtime):
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
