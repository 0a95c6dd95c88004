"""The helper classifier and the layer comparison on crafted records."""

from __future__ import annotations

from typing import Any

import torch

from distcheck.report import LayerDivergence
from distcheck.spec import MLIPSpec
from distcheck.validate.diagnosis import diagnose_helpers
from distcheck.validate.layers import compare_layers

N, B = 10, 2


def _sample(
    call: int,
    out: torch.Tensor,
    out_owned: torch.Tensor | None = None,
    atom_arg: int | None = 0,
    arg_rows: tuple[int, ...] = (N, N),
) -> dict[str, Any]:
    return {
        "call": call,
        "arg_shapes": [[r] for r in arg_rows],
        "atom_arg": atom_arg,
        "out_shape": list(out.shape),
        "out_dtype": str(out.dtype),
        "out": out,
        "out_owned": out_owned,
    }


def _record(samples: list[dict[str, Any]], n_calls: int = 3) -> dict[str, Any]:
    return {"n_calls": n_calls, "samples": samples, "source": {"file": "/x/ops.py", "line": 7}}


SPEC = MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1})
REF_OUT = torch.tensor([4.0, 6.0])


def test_partial_sums_that_add_up_without_halo_are_flagged_with_a_remedy() -> None:
    ref = {"calls": {"pkg.ops.mol_sum": _record([_sample(0, REF_OUT)])}}
    ranks = [
        {"calls": {"pkg.ops.mol_sum": _record([_sample(0, torch.tensor([3.0, 2.0]), torch.tensor([1.0, 2.0]))])}},
        {"calls": {"pkg.ops.mol_sum": _record([_sample(0, torch.tensor([4.0, 5.0]), torch.tensor([3.0, 4.0]))])}},
    ]
    (diag,) = diagnose_helpers(ref, ranks, SPEC, N, B)
    assert diag["pattern"] == "per_system_reduction" and diag["pattern_confidence"] == 1.0
    assert diag["consistency_passed"] is False and diag["suspected_gap"]
    assert diag["likely_remedy"] == {
        "kind": "reduction",
        "module_path": "pkg.ops",
        "attr_name": "mol_sum",
        "atom_arg": 0,
        "atom_dim": 0,
    }
    assert diag["n_calls_per_rank"] == {0: 3, 1: 3} and diag["source"]["line"] == 7
    assert "partial sums" in diag["divergence_notes"][0]


def test_every_sampled_call_is_checked() -> None:
    """The first call agrees, a later one does not: still flagged."""
    ref = {"calls": {"pkg.ops.mol_sum": _record([_sample(0, REF_OUT), _sample(8, REF_OUT)])}}
    good = _sample(0, REF_OUT, REF_OUT)
    ranks = [
        {"calls": {"pkg.ops.mol_sum": _record([good, _sample(8, torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]))])}},
        {"calls": {"pkg.ops.mol_sum": _record([good, _sample(8, torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.0]))])}},
    ]
    (diag,) = diagnose_helpers(ref, ranks, SPEC, N, B)
    assert diag["consistency_passed"] is False
    assert len(diag["divergence_notes"]) == 2 and "every rank returns the reference" in diag["divergence_notes"][0]


def test_replicated_results_pass_and_declared_helpers_are_checked_as_handled() -> None:
    ref = {"calls": {"pkg.ops.mol_sum": _record([_sample(0, REF_OUT)])}}
    same = [{"calls": {"pkg.ops.mol_sum": _record([_sample(0, REF_OUT, torch.tensor([2.0, 3.0]))])}}] * 2
    (diag,) = diagnose_helpers(ref, same, SPEC, N, B)
    assert diag["consistency_passed"] is True and diag["suspected_gap"] is None and diag["likely_remedy"] is None
    declared = MLIPSpec.from_dict(
        {
            "format": "distcheck-spec",
            "version": 1,
            "distribution": {
                "third_party_helpers": [{"kind": "reduction", "module_path": "pkg.ops", "attr_name": "mol_sum"}]
            },
        }
    )
    halves = [{"calls": {"pkg.ops.mol_sum": _record([_sample(0, REF_OUT / 2)])}}] * 2
    (diag,) = diagnose_helpers(ref, halves, declared, N, B)
    assert diag["already_wrapped"] and diag["consistency_passed"] is True and diag["suspected_gap"] is None


def test_other_patterns_are_classified() -> None:
    counts = _sample(0, torch.tensor([5, 5]), atom_arg=None)
    gather = _sample(0, torch.zeros(N), atom_arg=None, arg_rows=(B, N))
    scatter = _sample(0, torch.zeros(N), atom_arg=None, arg_rows=(37, 37))
    ref = {"calls": {"p.count": _record([counts]), "p.gather": _record([gather]), "p.scatter": _record([scatter])}}
    diags = {d["function"]: d for d in diagnose_helpers(ref, [None, None], SPEC, N, B)}
    assert diags["count"]["pattern"] == "count"
    assert diags["gather"]["pattern"] == "gather" and diags["gather"]["suspected_gap"] is None
    assert diags["scatter"]["pattern"] == "scatter"


def _layer(key: str, level: str, value: torch.Tensor) -> dict[str, Any]:
    return {"key": key, "module": key.split("#")[0], "class": "m.Block", "level": level, "value": value}


def test_first_divergent_layer_sums_owned_rows_over_ranks() -> None:
    ref = [
        _layer("embed#0", "per_atom", torch.tensor([10.0])),
        _layer("block#0", "per_atom", torch.tensor([5.0])),
        _layer("readout#0", "per_system", torch.tensor([1.0, 2.0])),
    ]
    rank0 = [
        _layer("embed#0", "per_atom", torch.tensor([4.0])),
        _layer("block#0", "per_atom", torch.tensor([2.0])),
        _layer("readout#0", "per_system", torch.tensor([1.5, 2.0])),
    ]
    rank1 = [
        _layer("embed#0", "per_atom", torch.tensor([6.0])),
        _layer("block#0", "per_atom", torch.tensor([3.5])),
        _layer("readout#0", "per_system", torch.tensor([1.5, 2.0])),
    ]
    result = compare_layers(ref, [rank0, rank1], rtol=1e-6)
    first = result.first_divergent
    assert result.checked == 3 and first is not None and first.rel_diff is not None
    assert first.module == "block" and abs(first.rel_diff - 0.1) < 1e-12
    ok = compare_layers(ref[:1], [rank0[:1], rank1[:1]], rtol=1e-6)
    assert ok.first_divergent is None and ok.max_rel_diff == 0.0


def test_layers_missing_on_a_rank_are_skipped_not_divergent() -> None:
    ref = [_layer("edge#0", "per_atom", torch.tensor([1.0]))]
    assert compare_layers(ref, [[], []], rtol=1e-6) == LayerDivergence(
        first_divergent=None, checked=0, max_rel_diff=0.0
    )
