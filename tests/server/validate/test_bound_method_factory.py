"""A factory that returns a bound method (`model.forward`) rather than the model: the reference and the
ranks read the cutoff, depth and output kinds off the object the method is bound to (`wrapper_attr`), so
a right spec passes, a wrong one fails with its first divergent module named, and the report names the
model's class, not `method`."""

from __future__ import annotations

import copy
import math

import cdist_models
import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime.model import WrapperError, resolve_halo_width, wrapper_attr
from distcheck.spec import MLIPSpec


def test_a_bound_method_is_described_by_its_object() -> None:
    model = cdist_models.model_factory()
    bound = model.forward
    assert wrapper_attr(bound, "cutoff") == cdist_models.CUTOFF
    assert wrapper_attr(bound, "num_interactions") == 3
    assert wrapper_attr(bound, "distribution_spec") is None
    spec = MLIPSpec.from_dict(copy.deepcopy(cdist_models.SPEC))
    assert resolve_halo_width(spec, bound) == resolve_halo_width(spec, model)
    assert math.isfinite(resolve_halo_width(spec, bound))


def test_a_plain_function_without_a_cutoff_is_still_refused_with_the_fix() -> None:
    def run(batch: object) -> None:
        return None

    spec = MLIPSpec.from_dict(copy.deepcopy(cdist_models.SPEC))
    with pytest.raises(WrapperError, match="cutoff"):
        resolve_halo_width(spec, run)


def _validate(spec: dict[str, object]) -> TraceReport:
    return validate_on_cpu(
        cdist_models.bound_forward_factory,
        cdist_models.sample_batch(),
        spec=copy.deepcopy(spec),
        world_size=2,
        timeout_sec=60,
        auto_fix=False,
    )


@pytest.mark.procs
def test_a_bound_forward_validates_like_its_model() -> None:
    right = _validate(cdist_models.SPEC)
    assert right.verdict == "passed", right.next_action
    wrapper = right.meta.wrapper
    assert wrapper is not None and wrapper.cls is not None and wrapper.cls.endswith("CdistMPNN")
    assert wrapper.cutoff == cdist_models.CUTOFF and wrapper.num_interactions == 3

    wrong = _validate(cdist_models.WRONG_SPEC)
    assert wrong.verdict == "failed"
    layers = wrong.attempts[0].layer_divergence
    assert layers is not None and layers.checked > 0 and layers.first_divergent is not None
