"""What spares import ahead: the installed packages a target's model imported (never the user's own
modules), per target, dropped whenever the environment or a listed package changes."""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcheck.processes.spares import learned


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A private cache, one fake site directory with package `sparepkg_a`, and a user directory with
    module `spare_usermod` (both importable)."""
    site, user = tmp_path / "site", tmp_path / "user"
    (site / "sparepkg_a").mkdir(parents=True)
    (site / "sparepkg_a" / "__init__.py").write_text("VALUE = 1\n")
    user.mkdir()
    (user / "spare_usermod.py").write_text("import sparepkg_a\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DISTCHECK_SPARE_PACKAGES", raising=False)
    monkeypatch.setattr(learned, "site_dirs", lambda: [os.path.realpath(site)])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(user))
    yield site, user
    for name in ("sparepkg_a", "sparepkg_b", "spare_usermod"):
        sys.modules.pop(name, None)


def _learn(target: str = "models/m.py:factory") -> list[str]:
    before = set(sys.modules)
    importlib.import_module("spare_usermod")  # the user's module, which imports an installed package
    learned.record(target, learned.third_party_since(before))
    return learned.packages_for(target)


def test_installed_packages_are_learned_the_user_s_modules_never(env: tuple[Path, Path]) -> None:
    assert _learn() == ["sparepkg_a"]
    assert learned.packages_for("models/other.py:factory") == []  # per target


def test_a_run_that_found_a_package_already_imported_keeps_it_learned(env: tuple[Path, Path]) -> None:
    assert _learn() == ["sparepkg_a"]
    # the next reference runs in a spare that imported sparepkg_a ahead: the model's import finds it loaded
    assert _learn() == ["sparepkg_a"]
    learned.record("models/m.py:factory", {})
    assert learned.packages_for("models/m.py:factory") == ["sparepkg_a"]  # not flipped back to nothing


def test_named_packages_come_after_the_learned_ones(env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCHECK_SPARE_PACKAGES", "mace, e3nn,,sparepkg_a")
    assert _learn() == ["sparepkg_a", "mace", "e3nn"]


def _bump(path: Path) -> None:
    later = time.time() + 5
    os.utime(path, (later, later))


@pytest.mark.parametrize("change", ["package-file", "install", "uninstall", "interpreter", "torch"])
def test_a_changed_environment_drops_what_was_learned(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    site, _ = env
    assert _learn() == ["sparepkg_a"]
    if change == "package-file":
        _bump(site / "sparepkg_a" / "__init__.py")  # upgraded in place
    elif change == "install":
        (site / "sparepkg_b").mkdir()
        _bump(site)
    elif change == "uninstall":
        (site / "sparepkg_a" / "__init__.py").unlink()
    elif change == "interpreter":
        monkeypatch.setattr(sys, "executable", "/elsewhere/bin/python")
    else:
        real = learned.fingerprint()
        monkeypatch.setattr(learned, "fingerprint", lambda: {**real, "torch": "9.9.9"})
    assert learned.packages_for("models/m.py:factory") == []


def test_a_broken_cache_file_means_nothing_learned(env: tuple[Path, Path]) -> None:
    path = Path(learned.cache_path())
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert learned.packages_for("models/m.py:factory") == []
    assert _learn() == ["sparepkg_a"]  # and it is rewritten whole


def test_the_fingerprint_reads_torchs_version_again_only_when_a_site_directory_changed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.metadata

    site = tmp_path / "site-packages"
    site.mkdir()
    reads: list[str] = []

    def version(name: str) -> str:
        reads.append(name)
        return f"2.{len(reads)}.0"

    monkeypatch.setattr(learned, "site_dirs", lambda: [str(site)])
    monkeypatch.setattr(importlib.metadata, "version", version)
    os.utime(site, ns=(1_000_000_000, 1_000_000_000))
    first = learned.fingerprint()
    assert learned.fingerprint() == first and reads == ["torch"]
    os.utime(site, ns=(2_000_000_000, 2_000_000_000))  # a package installed or removed
    changed = learned.fingerprint()
    assert reads == ["torch", "torch"]
    assert changed["torch"] == "2.2.0" and changed["site"] != first["site"]
