"""Factories that build their model from a random generator (`factory_rng_models`): the reference and
every rank build the same model from an unseeded factory, whichever generator it draws from and
whatever ran before in the process; a factory that builds a different model per process is reported
as such, at the factory, with no auto-fix attempt, instead of as a wrong spec."""

from __future__ import annotations

import random

import factory_rng_models as m
import numpy as np
import pytest
import torch

from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime.factory import resolve_factory
from distcheck.runtime.model_build import build_wrapper, weights_fingerprint
from distcheck.runtime.run_result import RankRecord
from distcheck.validate.model_identity import FACTORY_NOT_REPRODUCIBLE, factory_mismatch


def _validate(factory: object) -> TraceReport:
    return validate_on_cpu(factory, m.sample_batch(), world_size=2, timeout_sec=90)


@pytest.mark.procs
@pytest.mark.parametrize(
    "factory",
    [m.torch_unseeded, m.numpy_unseeded, m.python_random_unseeded, m.import_time_draw],
    ids=lambda f: f.__name__,
)
def test_an_unseeded_factory_builds_the_same_model_everywhere(factory: object) -> None:
    report = _validate(factory)
    assert report.verdict == "passed", report.next_action
    assert len(report.attempts) == 1


@pytest.mark.procs
@pytest.mark.parametrize(
    "factory", [m.reseeded_from_the_os, m.seeded_from_the_clock, m.shaped_by_the_rank], ids=lambda f: f.__name__
)
def test_a_factory_that_builds_another_model_per_process_is_named(factory: object) -> None:
    report = _validate(factory)
    assert report.verdict != "passed"
    assert len(report.attempts) == 1, "no spec can fix another model: no auto-fix attempt"
    error = report.attempts[0].error
    assert error is not None and error.type == FACTORY_NOT_REPRODUCIBLE, report.next_action
    assert error.user_frame is not None and error.user_frame.file.endswith("factory_rng_models.py")
    assert error.user_frame.function == factory.__name__  # type: ignore[attr-defined]
    first = report.next_action.splitlines()[0]
    assert "model_factory() built a different model on rank" in first and "load the trained weights" in first
    if factory is m.shaped_by_the_rank:
        assert "'rank_tag', which the reference's lacks" in first


def test_build_wrapper_starts_every_generator_from_the_same_state() -> None:
    ref = resolve_factory(m.python_random_unseeded)
    first = weights_fingerprint(build_wrapper(ref, torch.device("cpu")))
    torch.rand(7), np.random.rand(3), random.random()  # what a warm-up or an earlier attempt draws
    second = weights_fingerprint(build_wrapper(ref, torch.device("cpu")))
    assert first == second and first is not None and "r0" in first


def _record(rank: int, weights: dict[str, list[float]] | None) -> RankRecord:
    return RankRecord(rank, "cpu", 1, 0, 0, [], {}, {}, [], 0.0, weights=weights)


def test_round_off_between_devices_is_not_a_different_model() -> None:
    ref = {"weights": {"w": [4.0, 1.0, 10.0]}, "factory_frame": None}
    assert factory_mismatch(ref, [_record(0, {"w": [4.0, 1.0 + 1e-13, 10.0 * (1 + 1e-14)]})]) is None
    assert factory_mismatch(ref, [_record(0, None)]) is None  # a wrapper that is no nn.Module
    assert factory_mismatch({"weights": None}, [_record(0, {"w": [4.0, 2.0, 10.0]})]) is None


def test_each_way_a_model_can_differ_is_said() -> None:
    ref = {"weights": {"w": [4.0, 1.0, 10.0], "b": [2.0, 0.0, 1.0]}, "factory_frame": None}
    cases = {
        "'w' sums to 1 in the reference and 1.5 on rank 1": {"w": [4.0, 1.5, 10.0], "b": [2.0, 0.0, 1.0]},
        "'w' has 4 elements in the reference and 5 on rank 1": {"w": [5.0, 1.0, 10.0], "b": [2.0, 0.0, 1.0]},
        "'w' sums to 1 in the reference and 2 on rank 1 (and 1 more)": {"w": [4.0, 2.0, 10.0], "b": [2.0, 0.0, 4.0]},
        "its model lacks 'b'": {"w": [4.0, 1.0, 10.0]},
        "its model has 'c', which the reference's lacks": {**ref["weights"], "c": [1.0, 0.0, 0.0]},  # type: ignore[dict-item]
    }
    for expected, weights in cases.items():
        error = factory_mismatch(ref, [_record(0, ref["weights"]), _record(1, weights)])  # type: ignore[arg-type]
        assert error is not None and error.rank == 1 and expected in error.message, (expected, error)
