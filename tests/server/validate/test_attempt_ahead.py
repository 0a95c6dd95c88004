"""The first attempt run ahead (`validate/attempt_ahead.py`): a validation whose target was validated
before from the same prior runs its first attempt while the reference runs, under the spec the last
one started with, and reports exactly what waiting for the reference reports: when the guess is right
(before the receptive-field measurement or after it), when it is wrong (the attempt runs again under
the inferred spec, which is remembered instead), and when the run fails. Progress events keep their
order: the reference finishes before the attempt's ranks are reported."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import factory_rng_models as rng_models
import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.processes.spares import learned
from distcheck.runtime.factory import load_object, resolve_factory
from distcheck.spec import MLIPSpec
from examples import pair_potential, unaware_model

SHALLOW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models", "shallow_depth.py")

pytestmark = [pytest.mark.timeout(300), pytest.mark.procs]


Validate = Callable[..., tuple[TraceReport, dict[str, Any]]]


@pytest.fixture
def validate(stable_report: Callable[[TraceReport], dict[str, Any]]) -> Validate:
    """`validate(factory, sample, events=None, **options)`: the report and its stable form; the progress
    events' names go to `events`."""

    def run(factory: Any, sample: Any, events: list[str] | None = None, **options: Any) -> Any:
        def progress(name: str, info: Any) -> None:
            if events is not None:
                events.append(name)

        report = validate_on_cpu(factory, sample, world_size=2, timeout_sec=120, progress=progress, **options)
        return report, stable_report(report)

    return run


def _target(factory: Any) -> str:
    return resolve_factory(factory).describe()


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Callable[[str], None]:
    """A fresh cache; the returned function sets DISTCHECK_ATTEMPT_AHEAD."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def ahead(value: str) -> None:
        monkeypatch.setenv("DISTCHECK_ATTEMPT_AHEAD", value)

    return ahead


CASES: dict[str, tuple[Any, Callable[[], Any], dict[str, Any]]] = {
    # two attempts: the declared spec fails, auto-fix's `local` halo passes
    "unaware": (unaware_model.model_factory, unaware_model.sample_batch, {"spec": unaware_model.WRONG_SPEC}),
    # the receptive field changes the first spec: the guess is the spec after the measurement
    "shallow": (f"{SHALLOW}:model_factory", load_object(f"{SHALLOW}:sample_batch"), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_right_guess_runs_the_first_attempt_ahead_and_reports_the_same(
    cache: Callable[[str], None], validate: Validate, case: str
) -> None:
    factory, sample, options = CASES[case]
    cache("0")
    waited_report, waited = validate(factory, sample(), **options)
    assert "ran_ahead" not in waited_report.attempts[0].timings
    # learned also when off: the spec the first attempt ran under, after the receptive-field check
    remembered = learned.first_spec_for(_target(factory), _prior(options))
    assert remembered == waited_report.attempts[0].spec.to_dict()
    cache("1")
    events: list[str] = []
    again, ahead = validate(factory, sample(), events, **options)
    assert "ran_ahead" in again.attempts[0].timings, again.attempts[0].timings
    assert ahead == waited
    assert events.index("reference_finished") < events.index("rank_started") < events.index("attempt_finished")


def _prior(options: dict[str, Any]) -> str:
    spec = options.get("spec")
    return MLIPSpec.coerce(spec).signature() if spec is not None else ""


def test_a_wrong_guess_is_dropped_and_the_inferred_spec_remembered(
    cache: Callable[[str], None], validate: Validate
) -> None:
    cache("0")
    _, waited = validate(pair_potential.model_factory, pair_potential.sample_batch())
    cache("1")
    wrong = MLIPSpec.coerce(pair_potential.SPEC).to_dict()
    wrong["distribution"]["policy"]["scatter_mode"] = "local"
    target = _target(pair_potential.model_factory)
    learned.record_first_spec(target, "", wrong)
    report, guessed = validate(pair_potential.model_factory, pair_potential.sample_batch())
    assert "ran_ahead" not in report.attempts[0].timings
    assert guessed == waited
    assert learned.first_spec_for(target, "") == report.attempts[0].spec.to_dict() != wrong


def test_a_guess_from_another_prior_is_not_used(cache: Callable[[str], None], validate: Validate) -> None:
    cache("1")
    target = _target(unaware_model.model_factory)
    learned.record_first_spec(target, "", MLIPSpec.coerce(unaware_model.WRONG_SPEC).to_dict())
    report, _ = validate(unaware_model.model_factory, unaware_model.sample_batch(), spec=unaware_model.WRONG_SPEC)
    assert "ran_ahead" not in report.attempts[0].timings


def test_a_failed_run_ahead_is_the_first_attempts_outcome(cache: Callable[[str], None], validate: Validate) -> None:
    """A factory that builds another model on the ranks: the run ahead fails the same way the attempt
    does when it waits, and its outcome is the attempt's (no second run of the ranks)."""
    factory = rng_models.shaped_by_the_rank
    cache("0")
    _, waited = validate(factory, rng_models.sample_batch())
    cache("1")
    validate(factory, rng_models.sample_batch())
    report, ahead = validate(factory, rng_models.sample_batch())
    assert "ran_ahead" in report.attempts[0].timings
    assert ahead == waited
    assert report.attempts[0].error is not None and report.attempts[0].error.type == "FactoryNotReproducible"


def test_by_default_it_runs_ahead_only_with_a_core_for_each_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset, the reference and the W ranks must each have a core (else they only take turns); the
    variable forces either way."""
    from distcheck import rank_limits
    from distcheck.processes.spares.settings import attempt_ahead_enabled

    monkeypatch.delenv("DISTCHECK_ATTEMPT_AHEAD", raising=False)
    monkeypatch.setattr(rank_limits, "usable_cores", lambda: 3)
    assert attempt_ahead_enabled(2) and not attempt_ahead_enabled(3)
    monkeypatch.setenv("DISTCHECK_ATTEMPT_AHEAD", "1")
    assert attempt_ahead_enabled(8)
    monkeypatch.setenv("DISTCHECK_ATTEMPT_AHEAD", "0")
    assert not attempt_ahead_enabled(2)


def test_a_reference_that_fails_is_reported_as_when_waiting(
    cache: Callable[[str], None], validate: Validate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranks ran ahead and ended well, the reference raised: the report is the reference's failure,
    as without the run ahead, and the ranks kept for the validation are gone."""
    from distcheck.processes import spares
    from distcheck.validate.attempt_ahead import AttemptAhead

    outcomes: list[str] = []
    run_ahead = AttemptAhead.__call__

    def spy(self: AttemptAhead) -> None:
        run_ahead(self)
        outcomes.append(type(self.outcome).__name__)

    monkeypatch.setattr(AttemptAhead, "__call__", spy)
    factory = rng_models.reference_raises
    cache("0")
    _, waited = validate(factory, rng_models.sample_batch())
    cache("1")
    learned.record_first_spec(_target(factory), "", MLIPSpec.coerce(pair_potential.SPEC).to_dict())
    report, ahead = validate(factory, rng_models.sample_batch())
    assert outcomes == ["DistributedRun"], "the ranks did not run ahead, or failed"
    assert report.verdict == "error" and report.attempts[0].error is not None
    assert "the single-process run fails here" in report.attempts[0].error.message
    assert ahead == waited
    assert spares.pool().report()["devices"] == {}, "processes outlived the validation"
