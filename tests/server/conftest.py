"""Fixtures every server test shares: no test reads or writes the user's real distcheck cache.

Every test runs with XDG_CACHE_HOME pointing at one temporary directory of the test session (so
the stores `distcheck.memory` describes start empty once per session, and the bytecode compiled
there serves the session's later tests); every process a test starts inherits it. A test that
needs an empty cache of its own asks for `fresh_cache` (or sets XDG_CACHE_HOME itself, which wins).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def session_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cache home (XDG_CACHE_HOME), distcheck's directory in it made by the first use."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def _cache_home(session_cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """XDG_CACHE_HOME for this test: the session's, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(session_cache_home))
    return session_cache_home


@pytest.fixture
def fresh_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache home (XDG_CACHE_HOME) for this test alone; returns distcheck's directory in it."""
    home = tmp_path_factory.mktemp("xdg-cache-own")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "distcheck"
