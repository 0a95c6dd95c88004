"""`cache_home.private_dir`: a directory under distcheck's cache that only this user may write (what a
process reads there can run code), made so under any umask, and refused once others may write it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcheck import cache_home


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "distcheck"


def test_a_fresh_cache_is_private_under_a_group_writable_umask(home: Path) -> None:
    old = os.umask(0o002)
    try:
        made = cache_home.private_dir("bytecode")
    finally:
        os.umask(old)
    assert made == str(home / "bytecode")
    assert {oct(p.stat().st_mode & 0o777) for p in (home, home / "bytecode")} == {"0o700"}


@pytest.mark.parametrize("shared", ["distcheck", "leaf"])
def test_a_directory_others_may_write_is_refused(home: Path, shared: str) -> None:
    assert cache_home.private_dir("bytecode") is not None
    (home if shared == "distcheck" else home / "bytecode").chmod(0o777)
    assert cache_home.private_dir("bytecode") is None


def test_with_empty_a_directory_holding_anything_is_refused(home: Path) -> None:
    assert cache_home.private_dir("empty", empty=True) == str(home / "empty")
    (home / "empty" / "planted.py").write_text("")
    assert cache_home.private_dir("empty", empty=True) is None
