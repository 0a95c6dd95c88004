"""The real-model tests' warm pool preloads the real packages in this process's forkserver only: the
session's environment keeps no DISTCHECK_PRELOAD, so a CLI or daemon another test starts does not
import them in a forkserver of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import WARM_MODULE, WARM_POOL

pytestmark = pytest.mark.procs


def test_the_warm_preload_does_not_leak_into_the_session_environment() -> None:
    if not WARM_POOL:
        pytest.skip("no warm pool here (a GPU machine, or a forkserver started before collection)")
    assert WARM_MODULE not in os.environ.get("DISTCHECK_PRELOAD", "")
    code = "from distcheck.processes.forkserver import preload_modules; print(','.join(preload_modules()))"
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert WARM_MODULE not in seen.stdout
