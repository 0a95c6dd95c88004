"""Receptive-field measurements remembered per model and sample (`validate/field_cache.py`): the key
changes with everything a fresh process's measurement depends on (every output's exact bytes, the
environment variables the model read), a remembered measurement stops the child's own, one that did
not finish is never stored, and a real validation run again on an unchanged model takes it while one
whose model file, config file or environment variable changed measures again and reports what a
fresh process reports."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
import torch

from distcheck import memory, validate_on_cpu
from distcheck.processes.spares import learned
from distcheck.runtime.factory import load_object
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
        "imported_packages": {"thirdparty": {"/venv/site-packages/thirdparty/__init__.py": [1, 10]}},
        "env_reads": {"MODEL_DEPTH": "3", "UNSET": None},
        "file_reads": {"/project/config.json": [12, "9f" * 32]},
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


def test_the_key_sees_every_bit_of_every_output() -> None:
    """A weak far hop (weight 1e-7) moves the outputs by less than a rounding to about 1e-6 shows."""
    forces = _reference()["outputs"]["forces"]
    nudged = forces.clone()
    nudged[7] = torch.nextafter(nudged[7], torch.tensor(2.0))  # one value, one ulp
    assert _key(outputs={"energy": torch.tensor([-3.25], dtype=torch.float64), "forces": nudged}) != _key()
    close = {"energy": torch.tensor([-3.25 * (1 + 1e-9)], dtype=torch.float64), "forces": forces}
    assert _key(outputs=close) != _key()
    as_float32 = {"energy": torch.tensor([-3.25], dtype=torch.float32), "forces": forces}  # same values
    assert _key(outputs=as_float32) != _key()
    reshaped = {"energy": torch.tensor([-3.25], dtype=torch.float64), "forces": forces.reshape(10, 3)}
    assert _key(outputs=reshaped) != _key()


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
        {"env_reads": {"MODEL_DEPTH": "4", "UNSET": None}},  # a variable the model read has another value
        {"env_reads": {"MODEL_DEPTH": "3", "UNSET": "1"}},  # one it found unset is set
        {"env_reads": {"MODEL_DEPTH": "3"}},  # it reads another set of variables
        {"file_reads": {"/project/config.json": [12, "a0" * 32]}},  # its config file holds another text
        {"file_reads": {"/project/config.json": [12, "9f" * 32], "/project/radii.csv": [3, "11" * 32]}},
        {"imported_packages": {"thirdparty": {"/venv/site-packages/thirdparty/__init__.py": [2, 10]}}},
    ],
)
def test_the_key_changes_with_what_the_measurement_depends_on(change: dict[str, Any]) -> None:
    assert _key(**change) != _key()


def _cuda_key(**changes: Any) -> str:
    sample, reference = _sample(), _reference()
    reference.update(changes)
    return field_cache.field_key("/project/model.py:model_factory", "cuda:0", sample, reference)


def test_on_a_gpu_the_key_holds_through_last_bit_noise_and_sees_the_rest() -> None:
    """A GPU's scatters differ from run to run in the last bits: there the outputs key by their sums to
    `GPU_DIGITS`, so the same model keys the same; the files, weights, variables and data files still
    tell models apart, and so do outputs that move the sums."""
    forces = _reference()["outputs"]["forces"]
    noisy = forces.clone()
    noisy[3] = torch.nextafter(noisy[3], torch.tensor(2.0))
    energy = torch.tensor([-3.25], dtype=torch.float64)
    assert _cuda_key(outputs={"energy": energy, "forces": noisy}) == _cuda_key()
    assert _cuda_key(outputs={"energy": energy, "forces": forces * 1.001}) != _cuda_key()
    assert _cuda_key(outputs={"energy": energy, "forces": forces.reshape(10, 3)}) != _cuda_key()
    assert _cuda_key(outputs={"energy": energy.float(), "forces": forces}) != _cuda_key()
    assert _cuda_key(file_reads={"/project/config.json": [12, "a0" * 32]}) != _cuda_key()
    assert _cuda_key(env_reads={"MODEL_DEPTH": "4", "UNSET": None}) != _cuda_key()
    assert _cuda_key(weights={"w": [4, 1.5, 2.26]}) != _cuda_key()


def test_the_key_changes_with_the_target_and_the_device() -> None:
    sample, reference = _sample(), _reference()
    base = field_cache.field_key("a.py:f", "cpu", sample, reference)
    assert field_cache.field_key("b.py:f", "cpu", sample, reference) != base
    assert field_cache.field_key("a.py:f", "cuda:0", sample, reference) != base


def test_a_measurement_of_another_environment_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    _field_for(_Pending(MEASURED))
    real = memory.environment()
    monkeypatch.setattr(memory, "environment", lambda: {**real, "site": {"/venv/site-packages": 2}})
    pending = _Pending(MEASURED)
    _field_for(pending)  # a package installed or removed since
    assert pending.calls == ["collect"]


def test_only_the_users_own_modules_are_stamped() -> None:
    """Installed packages are stamped by `learned.third_party_since` (the key's `packages`), the
    standard library by the environment (`memory.environment`)."""
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
    monkeypatch.setattr(field_cache, "STORE", dataclasses.replace(field_cache.STORE, max_entries=3))
    for depth in range(5):
        _field_for(_Pending(MEASURED), weights={"w": [depth]})
    assert len(field_cache.STORE.load()) == 3
    newest, oldest = _Pending(MEASURED), _Pending(MEASURED)
    _field_for(newest, weights={"w": [4]})
    _field_for(oldest, weights={"w": [0]})
    assert newest.calls == ["abandon"] and oldest.calls == ["collect"]


@pytest.mark.procs
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
    entries = field_cache.STORE.load()
    assert len(entries) == 1
    (key,) = entries
    entries[key]["measured_depth"] = 7  # a stored value the child's measurement could not give
    field_cache.STORE.save(entries)
    third = validate_on_cpu(factory, batch, world_size=2)
    assert third.receptive_field is not None and third.receptive_field.measured_depth == 7
    stamp = os.stat(model).st_mtime_ns
    os.utime(model, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))  # saved again, same text
    time.sleep(0.01)
    fourth = validate_on_cpu(factory, batch, world_size=2)
    assert fourth.receptive_field == first.receptive_field, "a changed model file must be measured again"
    assert len(field_cache.STORE.load()) == 2


# -- a setting that is no module file: the far-hop weight in a config file, or in the environment -------

FAR_HOP = Path(__file__).resolve().parent / "far_hop_models.py"


def _far_hop_report(factory: str) -> Any:
    return validate_on_cpu(factory, load_object(f"{FAR_HOP}:sample_batch")(), world_size=2, timeout_sec=120)


def _fresh(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> Any:
    """`run()` as a fresh process gives it: the field measured, nothing remembered taken."""
    with monkeypatch.context() as m:
        m.setenv("DISTCHECK_FIELD_CACHE", "0")
        return run()


def _assert_under_declared(report: Any) -> None:
    field = report.receptive_field
    assert field is not None and field.measured_depth == 3 and field.under_declared, field
    assert "UNDER-DECLARED" in report.next_action
    assert report.attempts[0].spec.distribution.policy.halo_width == pytest.approx(3 * 3.0 + 0.5)


@pytest.fixture
def far_hop_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    model = tmp_path / "far_hop_model.py"
    shutil.copy(FAR_HOP, model)
    return model


@pytest.mark.procs
def test_a_config_file_that_adds_a_weak_far_hop_is_measured_again(
    far_hop_path: Path, monkeypatch: pytest.MonkeyPatch, stable_report: Callable[[Any], dict[str, Any]]
) -> None:
    """Weight 0 in the model's config file: two layers deep, as declared. Then 1e-7: three deep, which
    no file, weight or rounded output shows; the next validation in this process must say what a fresh
    process says (UNDER-DECLARED, the halo of three layers), not reuse the depth of two."""
    factory = f"{far_hop_path}:config_factory"
    config = far_hop_path.parent / "far_hop.json"
    config.write_text(json.dumps({"far_hop_weight": 0.0}))
    first = _far_hop_report(factory)
    assert first.receptive_field is not None and first.receptive_field.measured_depth == 2
    assert not first.receptive_field.under_declared and "UNDER-DECLARED" not in first.next_action
    config.write_text(json.dumps({"far_hop_weight": 1e-7}))
    warm = _far_hop_report(factory)
    fresh = _fresh(monkeypatch, lambda: _far_hop_report(factory))
    _assert_under_declared(fresh)
    _assert_under_declared(warm)
    assert stable_report(warm) == stable_report(fresh)


@pytest.mark.procs
def test_an_environment_variable_that_adds_a_weak_far_hop_is_measured_again(
    far_hop_path: Path, monkeypatch: pytest.MonkeyPatch, stable_report: Callable[[Any], dict[str, Any]]
) -> None:
    factory = f"{far_hop_path}:env_factory"
    monkeypatch.delenv("FAR_HOP_WEIGHT", raising=False)
    noted: list[dict[str, str | None]] = []
    real_note = learned.note_env_reads

    def note(target: str, reads: Mapping[str, str | None]) -> None:
        noted.append(dict(reads))
        real_note(target, reads)

    monkeypatch.setattr(field_cache, "note_env_reads", note)
    first = _far_hop_report(factory)
    assert first.receptive_field is not None and first.receptive_field.measured_depth == 2
    assert noted[-1].get("FAR_HOP_WEIGHT", "missing") is None, noted  # the reference child recorded the read
    assert not any(k.startswith("DISTCHECK_") for k in noted[-1]), "distcheck's own reads are not the model's"
    monkeypatch.setenv("FAR_HOP_WEIGHT", "1e-7")
    warm = _far_hop_report(factory)
    assert noted[-1]["FAR_HOP_WEIGHT"] == "1e-7"
    fresh = _fresh(monkeypatch, lambda: _far_hop_report(factory))
    _assert_under_declared(fresh)
    _assert_under_declared(warm)
    assert stable_report(warm) == stable_report(fresh)
    monkeypatch.delenv("FAR_HOP_WEIGHT")
    again = _far_hop_report(factory)  # back to unset: the first measurement is remembered
    assert again.receptive_field is not None and again.receptive_field.measured_depth == 2
    assert stable_report(again) == stable_report(first)


# -- which environment variables the model reads (`runtime.env_reads`) ----------------------------------


def test_the_reads_of_the_models_code_are_recorded_and_distchecks_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from distcheck.processes.spares import settings
    from distcheck.runtime import env_reads

    monkeypatch.setenv("MODEL_DEPTH", "3")
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    monkeypatch.setenv("TMPDIR", str(Path(tempfile.gettempdir())))
    original = type(os.environ)
    recorder = env_reads.start()
    try:
        assert os.environ["MODEL_DEPTH"] == "3" and os.getenv("NOT_SET_HERE") is None
        assert "MODEL_DEPTH" in os.environ
        os.environ["WRITTEN_FIRST"] = "x"  # set by the code itself before it reads it: not an input
        assert os.environ.get("WRITTEN_FIRST") == "x"
        tempfile._candidate_tempdir_list()  # type: ignore[attr-defined]  # the standard library reads for its caller (this test)
        settings.resident_enabled()  # distcheck's own read
    finally:
        reads = recorder.stop()
        os.environ.pop("WRITTEN_FIRST", None)
    assert type(os.environ) is original
    assert reads["MODEL_DEPTH"] == "3" and reads["NOT_SET_HERE"] is None and "TMPDIR" in reads
    assert "WRITTEN_FIRST" not in reads and "DISTCHECK_RESIDENT_RANKS" not in reads
    env_factory = load_object(f"{FAR_HOP}:env_factory")
    recorder = env_reads.start()
    env_factory()
    assert recorder.stop() == {"FAR_HOP_WEIGHT": None}


# -- which data files the model reads (`runtime.file_reads`) --------------------------------------------


def test_the_files_the_models_code_reads_are_recorded_with_their_content(tmp_path: Path) -> None:
    import numpy as np

    from distcheck.processes.spares import learned as learned_store
    from distcheck.runtime import file_reads

    config, table, out = tmp_path / "config.json", tmp_path / "radii.npy", tmp_path / "written.txt"
    config.write_text('{"depth": 3}')
    np.save(table, np.arange(4.0))
    recorder = file_reads.start()
    try:
        with open(config) as fh:
            json.load(fh)
        np.load(table)
        fd = os.open(config, os.O_RDONLY)
        os.close(fd)
        out.write_text("written, not read")
        learned_store._unchanged({str(config): [1, 1]})  # distcheck's own look at a file
    finally:
        reads = recorder.stop()
    assert set(reads) == {str(config.resolve()), str(table.resolve())}, reads
    stamp = reads[str(config.resolve())]
    config.write_text('{"depth": 4}')  # same size, other text
    again = file_reads.start()
    with open(config) as fh:
        fh.read()
    assert again.stop()[str(config.resolve())] != stamp


@pytest.mark.procs
def test_the_reference_child_records_the_config_file_its_model_reads(far_hop_path: Path) -> None:
    """Wired through: the reference child of a validation records the file its factory opened."""
    from distcheck.batch import as_batch
    from distcheck.runtime.factory import resolve_factory
    from distcheck.validate.reference import run_reference

    config = far_hop_path.parent / "far_hop.json"
    config.write_text(json.dumps({"far_hop_weight": 0.0}))
    batch = as_batch(load_object(f"{FAR_HOP}:sample_batch")())
    with run_reference(
        resolve_factory(f"{far_hop_path}:config_factory"),
        batch,
        device="cpu",
        helper_packages=[],
        helper_sample_every=8,
        layer_diagnostic=False,
        timeout_sec=120,
    ) as ref:
        reads = ref.result["file_reads"]
    assert list(reads) == [str(config.resolve())], reads
