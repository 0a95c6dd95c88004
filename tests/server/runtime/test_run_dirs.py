"""Run directories are gone when `RunDir.remove` returns, also while a dying child still writes into
one, and a directory whose making was interrupted does not stay behind."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from distcheck.processes import run_dirs
from distcheck.processes.run_dirs import RunDir


@pytest.fixture(autouse=True)
def _private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)


def _writer(path: str, until: float) -> None:
    """What a child being killed does: files into the run directory, as long as it is there."""
    n = 0
    while time.monotonic() < until:
        try:
            with open(os.path.join(path, f"beacon-{n}"), "w") as f:
                f.write("x")
        except OSError:
            return  # the directory is gone
        n += 1


@pytest.mark.parametrize("writers", [1, 3])
def test_remove_outlasts_a_process_still_writing_into_the_directory(writers: int) -> None:
    made = RunDir("ref")
    until = time.monotonic() + 0.5
    threads = [threading.Thread(target=_writer, args=(made.path, until)) for _ in range(writers)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    made.remove()
    for t in threads:
        t.join()
    assert not os.path.lexists(made.path)


def test_an_interrupted_making_leaves_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(*_: object) -> None:
        raise KeyboardInterrupt  # the CLI's stop signals are raised like this, between two steps

    monkeypatch.setattr(run_dirs.fcntl, "flock", stopped)
    with pytest.raises(KeyboardInterrupt):
        RunDir("ref")
    assert not [n for n in os.listdir(tmp_path) if n.startswith("distcheck-")]
