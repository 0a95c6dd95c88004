"""Where distcheck keeps what it remembers between processes (`memory` says what), and the rule for
every directory of it that it reads or writes: only this user may write it (what a process there reads
can run code or decide a verdict: a start directory, bytecode, a remembered measurement). No torch.
"""

from __future__ import annotations

import os
import stat

__all__ = ["cache_dir", "private_dir", "private_home"]


def cache_dir() -> str:
    """distcheck's directory for what it remembers between validations (under XDG_CACHE_HOME, else
    ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "distcheck")


def private_home() -> str | None:
    """`cache_dir()`, made (mode 0700) where missing; None unless it is a directory this user owns that
    nobody else may write, or when it cannot be made."""
    path = cache_dir()
    try:
        # its own mode: `makedirs` gives the parents the umask's (0775 under umask 002)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path if _owned_unshared(path) else None
    except OSError:
        return None


def private_dir(name: str, *, empty: bool = False) -> str | None:
    """`<cache_dir>/<name>`, made (mode 0700) where missing; None unless it and `cache_dir()` are
    directories this user owns that nobody else may write (and, with `empty`, it holds nothing), or
    when it cannot be made."""
    home = private_home()
    if home is None:
        return None
    path = os.path.join(home, name)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        if not _owned_unshared(path):
            return None
        if empty and os.listdir(path):
            return None
    except OSError:
        return None
    return path


def _owned_unshared(path: str) -> bool:
    info = os.lstat(path)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022
