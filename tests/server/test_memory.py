"""`distcheck.memory`, the one store module: the atomic writer, the bounds (least recently used out
first; the bytecode's oldest files), the environment every JSON store is read in, and the rule that
a store in a directory others may write is neither read nor written (each of the three stores)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from distcheck import memory
from distcheck.processes import bytecode_cache
from distcheck.processes.spares import learned
from distcheck.validate import field_cache
from distcheck.validate.reference_field import PendingField


@pytest.fixture
def home(fresh_cache: Path) -> Path:
    return fresh_cache


# -- the atomic writer ---------------------------------------------------------------------------------


def test_a_write_replaces_the_file_whole_and_a_reader_keeps_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_bytes(b"old " * 1000)
    with open(path, "rb") as reader:  # opened before the write: it must never see a part of the new file
        assert memory.write_atomic(str(path), b"new")
        assert reader.read() == b"old " * 1000
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.json"], "no temporary file left"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.json"
    path.write_bytes(b"old")

    def refused(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refused)
    assert memory.write_atomic(str(path), b"new") is False
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["store.json"]


def test_every_store_writes_through_the_one_writer(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []
    real = memory.write_atomic

    def spy(path: str, data: bytes) -> bool:
        written.append(os.path.basename(path))
        return real(path, data)

    monkeypatch.setattr(memory, "write_atomic", spy)
    learned.record("m.py:f", {})
    learned.record_first_spec("m.py:f", "", {"version": 1}, {})
    _field_for(_Pending(MEASURED))
    directory = memory.BYTECODE.directory()
    assert directory is not None
    monkeypatch.setattr(bytecode_cache, "_DECIDED", [directory])
    bytecode_cache._write(bytecode_cache.cached_path(directory, "/x/y.py"), b"code")
    assert written == ["spare-packages.json", "spare-packages.json", "receptive-fields.json", _pyc("y.py")]


def _pyc(name: str) -> str:
    return os.path.basename(bytecode_cache.cached_path("/c", "/x/" + name))


# -- bounds --------------------------------------------------------------------------------------------


def test_a_json_store_keeps_its_most_recently_used_entries(home: Path) -> None:
    store = memory.JsonStore("test-store.json", max_entries=3, max_bytes=memory.MIB)
    for name in "abcd":
        assert store.put(name, {"v": name})
    assert list(store.load()) == ["b", "c", "d"]  # the oldest out
    store.put("b", {"v": "b"})  # used again: now the newest
    store.put("e", {"v": "e"})
    assert list(store.load()) == ["d", "b", "e"]


def test_a_json_store_is_bounded_in_bytes_too(home: Path) -> None:
    store = memory.JsonStore("test-store.json", max_entries=100, max_bytes=3000)
    for i in range(10):
        store.put(f"k{i}", "x" * 900)
    kept = store.load()
    assert list(kept) == ["k7", "k8", "k9"]
    assert os.path.getsize(home / "test-store.json") < 3000 + 1000  # the bound, plus the environment's record
    assert store.put("huge", "x" * 5000) and "huge" not in store.load()  # larger than the bound: not kept


def test_a_remembered_field_taken_again_is_the_last_one_out(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(field_cache, "STORE", dataclasses.replace(field_cache.STORE, max_entries=2))
    _field_for(_Pending(MEASURED), weights={"w": [0]})
    _field_for(_Pending(MEASURED), weights={"w": [1]})
    _field_for(_Pending(MEASURED), weights={"w": [0]})  # taken: the most recently used now
    _field_for(_Pending(MEASURED), weights={"w": [2]})  # the least recently used ([1]) goes
    again = _Pending(MEASURED)
    _field_for(again, weights={"w": [0]})
    assert again.calls == ["abandon"]
    gone = _Pending(MEASURED)
    _field_for(gone, weights={"w": [1]})
    assert gone.calls == ["collect"]


def _tree(root: Path, sizes: dict[str, int]) -> None:
    for i, (name, size) in enumerate(sizes.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, ns=(1_000_000_000 * (i + 1), 1_000_000_000 * (i + 1)))  # older first


def test_files_are_evicted_oldest_first_down_to_three_quarters_of_the_bound(tmp_path: Path) -> None:
    _tree(tmp_path, {"a/old.pyc": 400, "b/c/older_than_new.pyc": 400, "a/mid.pyc": 400, "new.pyc": 400})
    assert memory.evict_files(str(tmp_path), max_bytes=2000) == 0  # within the bound: nothing goes
    assert memory.evict_files(str(tmp_path), max_bytes=1200) == 800
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.pyc"))
    assert left == ["a/mid.pyc", "new.pyc"]


def test_the_bytecode_cache_stays_within_its_bound(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "BYTECODE", memory.FileStore("bytecode", max_bytes=10_000))
    monkeypatch.setattr(bytecode_cache, "SWEEP_EVERY", 1)
    monkeypatch.setattr(bytecode_cache, "_UNSWEPT", [0])
    directory = memory.BYTECODE.directory()
    assert directory is not None
    monkeypatch.setattr(bytecode_cache, "_DECIDED", [directory])
    for i in range(30):
        target = bytecode_cache.cached_path(directory, f"/site-packages/pkg/m{i}.py")
        bytecode_cache._write(target, b"c" * 1000)
        os.utime(target, ns=(1_000_000_000 * (i + 1),) * 2)
    files = sorted(Path(directory).rglob("*.pyc"))
    assert sum(p.stat().st_size for p in files) <= 10_000
    assert any(p.name.startswith("m29.") for p in files), "the newest file was evicted"
    assert not any(p.name.startswith("m0.") for p in files), "the oldest file was kept"


# -- the environment -----------------------------------------------------------------------------------


def test_a_store_written_in_another_environment_is_read_as_empty(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.FIELDS.put("k", {"v": 1}) and memory.FIELDS.load() == {"k": {"v": 1}}
    real = memory.environment()
    for change in ({"torch": "9.9.9"}, {"distcheck": "0.0.0-other"}, {"python": "/elsewhere/python"}):
        monkeypatch.setattr(memory, "environment", lambda change=change: {**real, **change})
        assert memory.FIELDS.load() == {}, change


def test_the_environment_names_the_interpreter_and_the_versions() -> None:
    import distcheck

    env = memory.environment()
    assert env["python"] == sys.executable and env["version"] == sys.version
    assert env["distcheck"] == distcheck.__version__ and env["torch"] == memory.installed_torch_version()
    assert all(isinstance(v, int) for v in env["site"].values()) and env["site"]


# -- private directories -------------------------------------------------------------------------------


def _fill_every_store(home: Path, site: Path) -> None:
    learned.record("m.py:f", {"sparepkg_mem": {str(site / "sparepkg_mem" / "__init__.py"): _stat(site)}})
    _field_for(_Pending(MEASURED))
    assert learned.packages_for("m.py:f") == ["sparepkg_mem"]
    assert _field_for(_Pending(MEASURED))["remembered"] is True


def _stat(site: Path) -> list[int]:
    st = os.stat(site / "sparepkg_mem" / "__init__.py")
    return [st.st_mtime_ns, st.st_size]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "site-packages" / "sparepkg_mem").mkdir(parents=True)
    (tmp_path / "site-packages" / "sparepkg_mem" / "__init__.py").write_text("")
    return tmp_path / "site-packages"


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_cache_directory_others_may_write_is_neither_read_nor_written(home: Path, site: Path, mode: int) -> None:
    _fill_every_store(home, site)
    before = {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()}
    home.chmod(mode)
    try:
        assert learned.packages_for("m.py:f") == [], "learned packages read from a shared directory"
        pending = _Pending(MEASURED)
        assert "remembered" not in _field_for(pending) and pending.calls == ["collect"], "field read from it"
        learned.record("m.py:g", {})
        learned.record_first_spec("m.py:g", "", {"version": 1}, {})
        assert learned.first_spec_for("m.py:g", "") is None
        _field_for(_Pending(MEASURED), weights={"w": [9]})
        assert memory.BYTECODE.directory() is None  # the bytecode cache is refused as before
        assert {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()} == before, "written into it"
    finally:
        home.chmod(0o700)
    assert learned.packages_for("m.py:f") == ["sparepkg_mem"]  # private again: read again


def test_a_store_file_others_may_write_is_not_read(home: Path, site: Path) -> None:
    _fill_every_store(home, site)
    (home / "receptive-fields.json").chmod(0o666)
    (home / "spare-packages.json").chmod(0o620)
    assert learned.packages_for("m.py:f") == []
    pending = _Pending(MEASURED)
    _field_for(pending)
    assert pending.calls == ["collect"]


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_store_file_of_another_user_is_not_read(home: Path, site: Path) -> None:
    _fill_every_store(home, site)
    os.chown(home / "spare-packages.json", 12345, 12345)
    assert learned.packages_for("m.py:f") == []


# -- helpers -------------------------------------------------------------------------------------------


class _Pending:
    def __init__(self, measured: dict[str, Any]) -> None:
        self.measured = measured
        self.calls: list[str] = []

    def collect(self) -> dict[str, Any]:
        self.calls.append("collect")
        return self.measured

    def abandon(self) -> None:
        self.calls.append("abandon")


MEASURED = {"status": "measured", "cutoff": 3.0, "measured_depth": 2, "basis": "energy", "probes": 2, "note": "n"}


def _field_for(pending: _Pending, **changes: Any) -> dict[str, Any]:
    import torch

    sample = {"positions": torch.zeros(4, 3, dtype=torch.float64)}
    reference: dict[str, Any] = {
        "weights": {"w": [1]},
        "wrapper": {"cutoff": 3.0},
        "outputs": {"energy": torch.tensor([1.0], dtype=torch.float64)},
        **changes,
    }
    return field_cache.field_for(cast(PendingField, pending), "m.py:f", "cpu", sample, reference)
