"""validate_on_cpu end to end: examples pass, every DESIGN section 4 failure is found and fixed."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from seeded_bugs import SEEDED_BUGS, seeded_spec

from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime import FactoryError
from examples import charge_eq, helper_model, mpnn, pair_potential, stress_model, unaware_model

pytestmark = pytest.mark.procs

HERE = os.path.dirname(os.path.abspath(__file__))
FAULTS = os.path.join(HERE, "..", "runtime", "fault_models.py")


def _spec(module: Any) -> dict[str, Any]:
    return copy.deepcopy(module.model_factory().distribution_spec)


@pytest.mark.parametrize("module", [pair_potential, mpnn, charge_eq, stress_model])
def test_examples_pass_with_their_spec(module: Any) -> None:
    report = validate_on_cpu(module.model_factory, module.sample_batch())
    assert report.ok, report.next_action
    assert report.next_action.startswith("OK — ")
    assert report.fix_applied is None and len(report.attempts) == 1
    health = report.attempts[0].partition_health
    assert not health.degenerate and len(health.per_rank) == 2


def test_inference_without_any_prior_spec() -> None:
    """Kinds from shapes, stress all-reduced (autograd partial), charges owned-only — all from the trace."""
    bare = {"format": "distcheck-spec", "version": 1}
    report = validate_on_cpu(stress_model.model_factory, stress_model.sample_batch(), spec=bare, world_size=4)
    assert report.ok, report.next_action
    assert report.spec.all_reduce_outputs == ["stress"]
    assert report.spec.output_kinds == {"energy": "per_graph", "forces": "per_node", "stress": "per_graph"}
    report = validate_on_cpu(charge_eq.model_factory, charge_eq.sample_batch(), spec=bare)
    assert report.ok, report.next_action
    assert report.spec.owned_only_outputs == ["charges"]


@pytest.mark.parametrize(("module", "mutate", "rule"), SEEDED_BUGS)
def test_seeded_bug_is_found_and_fixed(module: Any, mutate: Any, rule: str) -> None:
    spec = seeded_spec(module, mutate)
    report = validate_on_cpu(module.model_factory, module.sample_batch(), spec=spec)
    assert not report.attempts[0].passed
    assert report.ok, report.next_action
    assert report.attempts[-1].rule == rule, [(a.rule, a.passed) for a in report.attempts]
    assert report.fix_applied == report.attempts[-1].rationale
    again = validate_on_cpu(module.model_factory, module.sample_batch(), spec=report.spec, auto_fix=False)
    assert again.ok, "the fixed spec must pass again when reused"


def test_halo_unaware_backbone_is_switched_to_owned_complete() -> None:
    report = validate_on_cpu(unaware_model.model_factory, unaware_model.sample_batch(), spec=unaware_model.WRONG_SPEC)
    assert [a.rule for a in report.attempts] == [None, "halo_correction_to_owned_complete"]
    assert report.ok and report.spec.distribution.policy.scatter_mode == "owned_complete"
    assert "halo-unaware" in report.attempts[1].rationale


def test_undeclared_helper_is_flagged_and_adapted(tmp_path: Any) -> None:
    report = validate_on_cpu(
        helper_model.model_factory, helper_model.sample_batch(), watched_helper_packages=["examples.thirdparty.nbops"]
    )
    first = report.attempts[0]
    flagged = [h for h in first.helper_diagnostics if h.suspected_gap]
    assert [h.qualname for h in flagged] == ["examples.thirdparty.nbops.mol_sum"]
    diag = flagged[0]
    assert diag.pattern == "per_system_reduction" and diag.consistency_passed is False
    assert diag.likely_remedy == {
        "kind": "reduction",
        "module_path": "examples.thirdparty.nbops",
        "attr_name": "mol_sum",
        "atom_arg": 0,
        "atom_dim": 0,
    }
    assert diag.source is not None and diag.source["file"].endswith("nbops.py")
    assert diag.n_calls_ref == 3 and diag.n_calls_per_rank == {0: 3, 1: 3}
    assert first.layer_divergence is not None and first.layer_divergence.first_divergent is not None
    assert report.ok and report.attempts[-1].rule == "declare_helper_adapter"
    handled = [h for h in report.attempts[-1].helper_diagnostics if h.already_wrapped]
    assert handled and handled[0].consistency_passed is True
    path = tmp_path / "helper.distspec.json"
    report.spec.save(path)
    again = validate_on_cpu(
        helper_model.model_factory,
        helper_model.sample_batch(),
        spec=str(path),
        watched_helper_packages=["examples.thirdparty.nbops"],
        auto_fix=False,
    )
    assert again.ok


def test_unwatched_helper_is_still_caught_by_the_dispatch_observer() -> None:
    """Not watched, the scripted helper is named by the dispatch observer and routed by running it eagerly."""
    report = validate_on_cpu(helper_model.model_factory, helper_model.sample_batch(), watched_helper_packages=())
    first = report.attempts[0]
    assert not first.passed
    assert first.handler_counts.get("unintercepted[aten.index_add]", 0) > 0
    assert {(u.origin, os.path.basename(u.file or "")) for u in first.unrouted} == {("torchscript", "nbops.py")}
    assert report.ok and report.attempts[-1].rule == "run_torchscript_eagerly", report.next_action
    assert report.spec.distribution.torchscript == "eager"
    assert report.meta.watched_helper_packages == []
    unfixed = validate_on_cpu(
        helper_model.model_factory, helper_model.sample_batch(), watched_helper_packages=(), auto_fix=False
    )
    assert unfixed.next_action.startswith("FAIL — ") and "_mol_sum at nbops.py:" in unfixed.next_action


def test_missing_watched_package_is_listed_in_meta() -> None:
    report = validate_on_cpu(
        pair_potential.model_factory,
        pair_potential.sample_batch(),
        watched_helper_packages=["no_such_package_xyz.nbops"],
    )
    assert report.ok
    assert report.meta.skipped_helper_packages == ["no_such_package_xyz.nbops"]


def test_degenerate_partition_is_inconclusive() -> None:
    from examples.structures import make_batch, periodic_slab_system

    small = make_batch([periodic_slab_system((3, 3, 4), seed=1)])
    report = validate_on_cpu(pair_potential.model_factory, small)
    assert report.verdict == "inconclusive" and not report.ok
    assert report.next_action.startswith("FAIL — DEGENERATE partition")
    assert "proves nothing" in report.next_action


def test_raising_factory_gives_a_report_with_the_hint() -> None:
    report = validate_on_cpu(f"{FAULTS}:factory_raises", pair_potential.sample_batch())
    assert not report.ok and report.verdict == "error"
    err = report.attempts[0].error
    assert err is not None and err.type == "ValueError" and err.frames[-1].function == "factory_raises"
    assert report.next_action.startswith("FAIL — the reference run failed")


def test_nan_output_names_rank_and_output() -> None:
    report = validate_on_cpu(f"{FAULTS}:factory_nan", pair_potential.sample_batch(), auto_fix=False)
    err = report.attempts[0].error
    assert err is not None and err.type == "NonFiniteOutput" and err.rank == 0 and "energy" in err.message


def test_nan_in_a_replicated_output_of_another_rank_still_fails() -> None:
    report = validate_on_cpu(f"{FAULTS}:factory_nan_rank1", pair_potential.sample_batch(), auto_fix=False)
    assert not report.ok
    err = report.attempts[0].error
    assert err is not None and err.type == "NonFiniteOutput" and err.rank == 1 and "energy" in err.message


def test_lambda_factory_is_refused_up_front() -> None:
    with pytest.raises(FactoryError, match="module scope"):
        validate_on_cpu(lambda: None, pair_potential.sample_batch())


def test_trace_and_validate_without_cuda_names_validate_on_cpu() -> None:
    import torch

    from distcheck import trace_and_validate

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="validate_on_cpu"):
        trace_and_validate(object(), object())


def test_report_round_trips_through_json() -> None:
    spec = _spec(stress_model)
    spec["all_reduce_outputs"] = []
    report = validate_on_cpu(stress_model.model_factory, stress_model.sample_batch(), spec=spec)
    assert TraceReport.from_json(report.to_json()) == report
    assert "stress" in report.render_text()
