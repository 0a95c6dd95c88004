"""Where installed packages carry no bytecode and none is written, distcheck's processes keep theirs in
distcheck's cache (`runtime/bytecode_cache`): an installed module is compiled once and read by every
later process, one with bytecode beside it is read from there, and the user's own modules load as the
interpreter would load them, never through the cache. Each case runs in a fresh interpreter, as the
forkserver, the CLI and the runner do."""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcheck.processes import bytecode_cache

pytestmark = pytest.mark.procs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Installed packages `slowpkg_bcc` (no bytecode) and `fastpkg_bcc` (compiled beside its source) and
    a user module `usermod_bcc` (no bytecode)."""
    site = tmp_path / "lib" / "site-packages"
    for name in ("slowpkg_bcc", "fastpkg_bcc"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("VALUE = 1\n")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "fastpkg_bcc")], check=True)
    user = tmp_path / "project"
    user.mkdir()
    (user / "usermod_bcc.py").write_text("VALUE = 2\n")
    return tmp_path


def _python(tree: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "DISTCHECK_BYTECODE_CACHE")}
    path = os.pathsep.join([str(tree / "lib" / "site-packages"), str(tree / "project"), str(ROOT / "server")])
    full = {
        **base,
        "PYTHONPATH": path,
        "XDG_CACHE_HOME": str(tree / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "DISTCHECK_PRELOAD": "slowpkg_bcc",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True, timeout=120
    )


FORKSERVER_LIKE = """
    import json, os, sys
    import distcheck.processes.forkserver_init  # as the forkserver starts: DISTCHECK_PRELOAD names slowpkg_bcc
    import slowpkg_bcc, fastpkg_bcc
    pid = os.fork()  # a rank forked from it imports the user's module
    if pid == 0:
        import usermod_bcc
        os._exit(0 if usermod_bcc.VALUE == 2 else 3)
    _, status = os.waitpid(pid, 0)
    from distcheck.processes import bytecode_cache
    print(json.dumps({"decided": bytecode_cache.use(), "slow": slowpkg_bcc.VALUE, "child": status}))
"""


def _cached(tree: Path) -> list[str]:
    root = tree / "cache" / "distcheck" / "bytecode"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.pyc")) if root.is_dir() else []


def _seen(run: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert run.returncode == 0, run.stderr
    seen: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    return seen


def test_an_installed_module_is_compiled_into_the_cache_once_and_the_user_s_never(tree: Path) -> None:
    cache = tree / "cache" / "distcheck" / "bytecode"
    assert _seen(_python(tree, FORKSERVER_LIKE)) == {"decided": str(cache), "slow": 1, "child": 0}
    cached = _cached(tree)
    assert any("slowpkg_bcc" in p for p in cached), cached
    assert not any("usermod_bcc" in p for p in cached), "the user's own module was compiled into the cache"
    assert not any("fastpkg_bcc" in p for p in cached), "a module compiled beside its source is read from there"
    assert not (tree / "lib" / "site-packages" / "slowpkg_bcc" / "__pycache__").exists(), "nothing beside the source"
    assert not (tree / "project" / "__pycache__").exists()
    assert oct(cache.stat().st_mode & 0o777) == "0o700"

    # the next process reads the kept code: planted code with the source's header is what it runs
    source = tree / "lib" / "site-packages" / "slowpkg_bcc" / "__init__.py"
    kept = Path(bytecode_cache.cached_path(str(cache), str(source)))
    header = kept.read_bytes()[:16]
    kept.write_bytes(header + marshal.dumps(compile("VALUE = 99\n", str(source), "exec")))
    assert _seen(_python(tree, FORKSERVER_LIKE))["slow"] == 99

    # a changed source (another size) is compiled again and kept again
    source.write_text("VALUE = 1000\n")
    assert _seen(_python(tree, FORKSERVER_LIKE))["slow"] == 1000
    assert _seen(_python(tree, FORKSERVER_LIKE))["slow"] == 1000
    assert kept.read_bytes()[:4] == importlib.util.MAGIC_NUMBER


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"DISTCHECK_BYTECODE_CACHE": "0"}, "turned off"),
        ({"PYTHONDONTWRITEBYTECODE": ""}, "bytecode is written beside the source"),
        ({"PYTHONPYCACHEPREFIX": "{tree}/users-prefix"}, "the user chose a prefix"),
        ({"DISTCHECK_PRELOAD": "fastpkg_bcc"}, "every package it preloads has bytecode"),
    ],
)
def test_nothing_changes_where_the_cache_is_not_wanted(tree: Path, env: dict[str, str], why: str) -> None:
    run = _python(tree, FORKSERVER_LIKE, **{k: v.format(tree=tree) for k, v in env.items()})
    assert _seen(run)["decided"] is None, why
    assert _cached(tree) == [], why


def test_a_cache_directory_others_may_write_is_not_used(tree: Path) -> None:
    shared = tree / "cache" / "distcheck" / "bytecode"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    assert _seen(_python(tree, FORKSERVER_LIKE))["decided"] is None, "bytecode others could plant runs code"
    assert _cached(tree) == []


def test_a_package_without_bytecode_is_named_only_where_none_would_be_written(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tree / "lib" / "site-packages"
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    found = bytecode_cache.uncompiled(["slowpkg_bcc", "fastpkg_bcc", "no_such_package_bcc"])
    assert found == [str(site / "slowpkg_bcc")]
    monkeypatch.setattr(sys, "pycache_prefix", str(tree / "users-prefix"))  # looked up there, not beside
    assert bytecode_cache.uncompiled(["fastpkg_bcc"]) == [str(site / "fastpkg_bcc")]
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert bytecode_cache.uncompiled(["slowpkg_bcc"]) == [], "the first import writes it under the user's prefix"


@pytest.mark.skipif(os.getuid() == 0, reason="root may write any directory")
def test_a_site_directory_this_user_may_not_write_counts_as_writing_none(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tree / "lib" / "site-packages"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package = tree / "lib" / "site-packages" / "slowpkg_bcc"
    package.chmod(0o555)
    try:
        assert bytecode_cache.uncompiled(["slowpkg_bcc"]) == [str(package)]
    finally:
        package.chmod(0o755)
