"""Receptive-field measurements remembered per model and sample (`validate/field_cache.py`): the key
changes with everything the measurement depends on and not with run-to-run noise, a remembered
measurement stops the child's own, one that did not finish is never stored, and a real validation
run again on an unchanged model takes it while one whose model file changed measures again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from distcheck import validate_on_cpu
from distcheck.validate import field_cache
from distcheck.validate.reference_field import PendingField

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DISTCHECK_FIELD_CACHE", raising=False)
    return tmp_path / "cache"


def _sample() -> dict[str, Any]:
    positions = torch.linspace(0.0, 9.0, 30, dtype=torch.float64).reshape(10, 3)
    return {
        "positions": positions,
        "atomic_numbers": torch.ones(10, dtype=torch.long),
        "pbc": torch.tensor([True, False, True]),
        "charge": torch.tensor(0.0, dtype=torch.float64),  # a 0-dim tensor
        "extras": {"spin": torch.tensor(2), "note": "x", "empty": torch.zeros(0)},
    }


def _reference() -> dict[str, Any]:
    return {
        "weights": {"w": [4, 1.5, 2.25]},
        "wrapper": {"cutoff": 3.0, "num_interactions": 2},
        "neighbor_cutoffs": [3.0],
        "receptive_cutoff": 3.0,
        "model_files": {"/project/model.py": [1, 100]},
        "outputs": {"energy": torch.tensor([-3.25], dtype=torch.float64), "forces": torch.linspace(-1, 1, 30)},
    }


def _key(**changes: Any) -> str:
    sample, reference = _sample(), _reference()
    for name, value in changes.items():
        if name in sample:
            sample[name] = value
        else:
            reference[name] = value
    return field_cache.field_key("/project/model.py:model_factory", "cpu", sample, reference)


def test_the_key_is_the_same_for_the_same_model_sample_and_outputs() -> None:
    assert _key() == _key()
    noisy = _reference()["outputs"]["forces"] * (1 + 1e-13)  # run-to-run noise of a GPU scatter
    assert _key(outputs={"energy": torch.tensor([-3.25 * (1 + 1e-14)], dtype=torch.float64), "forces": noisy}) == _key()


@pytest.mark.parametrize(
    "change",
    [
        {"positions": _sample()["positions"] + 1e-9},  # another sample, however close
        {"atomic_numbers": torch.full((10,), 2, dtype=torch.long)},
        {"charge": torch.tensor(1.0, dtype=torch.float64)},
        {"extras": {"spin": torch.tensor(1), "note": "x", "empty": torch.zeros(0)}},
        {"weights": {"w": [4, 1.5, 2.26]}},  # other weights
        {"wrapper": {"cutoff": 3.0, "num_interactions": 3}},  # another declaration
        {"neighbor_cutoffs": [4.0]},  # the forward asked for another cutoff
        {"model_files": {"/project/model.py": [2, 100]}},  # the model's file was saved again
        {"model_files": {"/project/model.py": [1, 100], "/project/layers.py": [1, 10]}},  # imports another
        {"outputs": {"energy": torch.tensor([-3.3], dtype=torch.float64), "forces": torch.linspace(-1, 1, 30)}},
    ],
)
def test_the_key_changes_with_what_the_measurement_depends_on(change: dict[str, Any]) -> None:
    assert _key(**change) != _key()


def test_the_key_changes_with_the_target_and_the_device() -> None:
    sample, reference = _sample(), _reference()
    base = field_cache.field_key("a.py:f", "cpu", sample, reference)
    assert field_cache.field_key("b.py:f", "cpu", sample, reference) != base
    assert field_cache.field_key("a.py:f", "cuda:0", sample, reference) != base


def test_the_key_changes_with_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    base = _key()
    monkeypatch.setattr(field_cache, "fingerprint", lambda: {"site": {"/venv/site-packages": 2}})
    assert _key() != base  # a package installed or removed


def test_only_the_users_own_modules_are_stamped() -> None:
    """Which installed or standard-library modules a reference child imports anew depends on what its
    spare imported ahead; they are covered by the environment's fingerprint instead."""
    import json

    import ase

    import examples.mpnn

    stamped = field_cache.module_files(["examples.mpnn", "json", "ase", "no.such.module"])
    assert list(stamped) == [examples.mpnn.__file__]
    assert json.__file__ not in stamped and ase.__file__ not in stamped
    assert stamped[examples.mpnn.__file__] == [
        os.stat(examples.mpnn.__file__).st_mtime_ns,
        os.path.getsize(examples.mpnn.__file__),
    ]


class _Pending:
    """A `PendingField` stand-in that records what `field_for` did with it."""

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
    sample, reference = _sample(), _reference()
    reference.update(changes)
    return field_cache.field_for(cast(PendingField, pending), "/p/m.py:f", "cpu", sample, reference)


def test_a_remembered_measurement_stops_the_childs_own() -> None:
    first = _Pending(MEASURED)
    assert _field_for(first) == MEASURED and first.calls == ["collect"]
    second = _Pending({"status": "measured", "measured_depth": 9})
    found = _field_for(second)
    assert second.calls == ["abandon"], "the child must not be waited for"
    assert found["measured_depth"] == 2 and found["remembered"] is True
    third = _Pending(MEASURED)
    _field_for(third, weights={"w": [1, 1.0, 1.0]})  # another model: measured
    assert third.calls == ["collect"]


def test_a_measurement_that_did_not_finish_is_not_remembered() -> None:
    failed = {"status": "not_measured", "cutoff": 3.0, "measured_depth": None, "basis": "", "note": "timed out"}
    assert _field_for(_Pending(failed)) == failed
    again = _Pending(MEASURED)
    assert _field_for(again) == MEASURED and again.calls == ["collect"]


def test_turned_off_it_always_measures(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    monkeypatch.setenv("DISTCHECK_FIELD_CACHE", "0")
    for _ in range(2):
        pending = _Pending(MEASURED)
        _field_for(pending)
        assert pending.calls == ["collect"]
    assert not own_cache.exists()


def test_an_unreadable_cache_file_only_means_measuring(own_cache: Path) -> None:
    path = own_cache / "distcheck" / "receptive-fields.json"
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    pending = _Pending(MEASURED)
    assert _field_for(pending) == MEASURED and pending.calls == ["collect"]
    assert _field_for(_Pending(MEASURED))["remembered"] is True  # rewritten


def test_only_the_newest_entries_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(field_cache, "MAX_ENTRIES", 3)
    for depth in range(5):
        _field_for(_Pending(MEASURED), weights={"w": [depth]})
    assert len(field_cache._read()) == 3
    newest, oldest = _Pending(MEASURED), _Pending(MEASURED)
    _field_for(newest, weights={"w": [4]})
    _field_for(oldest, weights={"w": [0]})
    assert newest.calls == ["abandon"] and oldest.calls == ["collect"]


def test_a_validation_run_again_takes_the_field_and_a_saved_model_file_measures_again(tmp_path: Path) -> None:
    model = tmp_path / "field_model.py"
    shutil.copy(ROOT / "examples" / "pair_potential.py", model)
    factory = f"{model}:model_factory"
    from examples.pair_potential import sample_batch

    batch = sample_batch()
    first = validate_on_cpu(factory, batch, world_size=2)
    second = validate_on_cpu(factory, batch, world_size=2)
    assert first.ok and second.ok
    assert first.receptive_field == second.receptive_field and first.receptive_field is not None
    assert first.receptive_field.status == "measured"
    entries = field_cache._read()
    assert len(entries) == 1
    (key,) = entries
    entries[key]["measured_depth"] = 7  # a stored value the child's measurement could not give
    field_cache._write(entries)
    third = validate_on_cpu(factory, batch, world_size=2)
    assert third.receptive_field is not None and third.receptive_field.measured_depth == 7
    stamp = os.stat(model).st_mtime_ns
    os.utime(model, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))  # saved again, same text
    time.sleep(0.01)
    fourth = validate_on_cpu(factory, batch, world_size=2)
    assert fourth.receptive_field == first.receptive_field, "a changed model file must be measured again"
    assert len(field_cache._read()) == 2
