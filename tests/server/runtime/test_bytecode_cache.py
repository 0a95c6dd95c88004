"""Where installed packages carry no bytecode and none is written, distcheck's processes keep theirs in
distcheck's cache (`runtime/bytecode_cache`): what the forkserver preloads is compiled once, read
by every later process, and the user's own modules are never written there. Each case runs in a
fresh interpreter, as the forkserver, the CLI and the runner do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcheck.runtime import bytecode_cache

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """An installed-looking package `slowpkg_bcc` and a user module `usermod_bcc`, neither compiled."""
    site = tmp_path / "site"
    (site / "slowpkg_bcc").mkdir(parents=True)
    (site / "slowpkg_bcc" / "__init__.py").write_text("VALUE = 1\n")
    user = tmp_path / "project"
    user.mkdir()
    (user / "usermod_bcc.py").write_text("VALUE = 2\n")
    return tmp_path


def _python(tree: Path, code: str, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "DISTCHECK_BYTECODE_CACHE")}
    path = os.pathsep.join([str(tree / "site"), str(tree / "project"), str(ROOT / "server")])
    full = {**base, "PYTHONPATH": path, "XDG_CACHE_HOME": str(tree / "cache"), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True, timeout=120
    )


FORKSERVER_LIKE = """
    import json, sys
    import distcheck.runtime.forkserver_init  # as the forkserver starts: DISTCHECK_PRELOAD names slowpkg_bcc
    import slowpkg_bcc
    import distcheck.runtime.forkserver_end
    import usermod_bcc  # the user's module, imported by a rank after the preload
    from distcheck.runtime import bytecode_cache
    print(json.dumps({"prefix": sys.pycache_prefix, "writes": not sys.dont_write_bytecode,
                      "decided": bytecode_cache.use()}))
"""


def _cached(tree: Path) -> list[str]:
    root = tree / "cache" / "distcheck" / "bytecode"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.pyc")) if root.is_dir() else []


def test_the_forkserver_keeps_what_it_preloads_and_never_the_user_s_modules(tree: Path) -> None:
    run = _python(tree, FORKSERVER_LIKE, DISTCHECK_PRELOAD="slowpkg_bcc")
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    prefix = str(tree / "cache" / "distcheck" / "bytecode")
    assert seen == {"prefix": prefix, "writes": False, "decided": prefix}, "writing stops at forkserver_end"
    cached = _cached(tree)
    assert any("slowpkg_bcc" in p for p in cached), cached
    assert not any("usermod_bcc" in p for p in cached), "the user's own module was compiled into the cache"
    assert not (tree / "site" / "slowpkg_bcc" / "__pycache__").exists(), "nothing is written beside the source"
    assert not (tree / "project" / "__pycache__").exists()
    assert oct((tree / "cache" / "distcheck" / "bytecode").stat().st_mode & 0o777) == "0o700"

    again = _python(tree, FORKSERVER_LIKE, "-v", DISTCHECK_PRELOAD="slowpkg_bcc")
    assert again.returncode == 0, again.stderr
    read = [ln for ln in again.stderr.splitlines() if ln.startswith("# code object from") and "slowpkg_bcc" in ln]
    assert read and prefix in read[0], "the next process reads the kept bytecode instead of compiling"


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"DISTCHECK_BYTECODE_CACHE": "0"}, "turned off"),
        ({"PYTHONDONTWRITEBYTECODE": ""}, "bytecode is written beside the source"),
        ({"PYTHONPYCACHEPREFIX": "{tree}/users-prefix"}, "the user chose a prefix"),
    ],
)
def test_nothing_changes_where_the_cache_is_not_wanted(tree: Path, env: dict[str, str], why: str) -> None:
    preload = {"DISTCHECK_PRELOAD": "slowpkg_bcc", **{k: v.format(tree=tree) for k, v in env.items()}}
    run = _python(tree, FORKSERVER_LIKE, **preload)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["decided"] is None, why
    assert _cached(tree) == [], why


def test_a_package_without_bytecode_is_named_only_where_none_would_be_written(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tree / "site"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode_cache.uncompiled(["slowpkg_bcc", "no_such_package_bcc"]) == [str(tree / "site" / "slowpkg_bcc")]
    monkeypatch.setattr(sys, "pycache_prefix", str(tree / "users-prefix"))  # the user's own prefix, not ours
    assert bytecode_cache.uncompiled(["slowpkg_bcc"]) == [str(tree / "site" / "slowpkg_bcc")]
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert bytecode_cache.uncompiled(["slowpkg_bcc"]) == [], "the first import writes it under the user's prefix"


@pytest.mark.skipif(os.getuid() == 0, reason="root may write any directory")
def test_a_site_directory_this_user_may_not_write_counts_as_writing_none(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tree / "site"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package = tree / "site" / "slowpkg_bcc"
    package.chmod(0o555)
    try:
        assert bytecode_cache.uncompiled(["slowpkg_bcc"]) == [str(package)]
    finally:
        package.chmod(0o755)


def test_a_cache_directory_others_may_write_is_not_used(tree: Path) -> None:
    shared = tree / "cache" / "distcheck" / "bytecode"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    run = _python(tree, FORKSERVER_LIKE, DISTCHECK_PRELOAD="slowpkg_bcc")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["decided"] is None, "bytecode others could plant runs code"
    assert _cached(tree) == []


def test_the_forkserver_writes_from_its_first_preload_to_its_last(monkeypatch: pytest.MonkeyPatch) -> None:
    from distcheck.runtime import spares_start

    monkeypatch.setenv("DISTCHECK_PRELOAD", "slowpkg_bcc, other_bcc,slowpkg_bcc")
    order = spares_start.preload_modules()
    assert order[0] == "distcheck.runtime.forkserver_init" and order[-1] == spares_start.PRELOAD_END
    assert order[-3:-1] == ["slowpkg_bcc", "other_bcc"], "the named packages are kept too, each once"
