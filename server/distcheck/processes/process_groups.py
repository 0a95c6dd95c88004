"""Killing whole process groups, the step every tree kill ends with (`lifeline.kill_tree` in a command
or the forkserver, `lsp.runner_tree.kill_all` in the daemon). Standard library only: no torch, no
psutil, so the daemon may import it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

__all__ = ["kill_groups"]


def kill_groups(groups: Iterable[int]) -> None:
    """SIGKILL every process group in `groups` but the caller's own; a group that is gone or may not be
    signalled is passed over."""
    others = set(groups)
    others.discard(os.getpgrp())
    for group in others:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
