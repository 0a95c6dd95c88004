"""End to end at world size 2 (gloo, CPU): a model whose per-system energy goes through a method of a
class of a watched third-party package fails without an adapter; the validator flags that method and
proposes a ready `method` adapter; the spec with it passes. One case per shape of method (instance,
an nn.Module's forward, an inherited forward, static, class)."""

from __future__ import annotations

import copy
from typing import Any

import method_kind_models as models
import pytest

from distcheck import validate_on_cpu
from distcheck.spec import HelperAdapter, MLIPSpec

pytestmark = pytest.mark.procs

OPTIONS: dict[str, Any] = {
    "world_size": 2,
    "timeout_sec": 60.0,
    "auto_fix": False,
    "watched_helper_packages": [models.MODULE],
}


@pytest.mark.parametrize("attr", sorted(models.FACTORIES))
def test_an_undeclared_helper_method_is_flagged_and_its_method_adapter_makes_the_spec_pass(attr: str) -> None:
    factory = models.FACTORIES[attr]
    report = validate_on_cpu(factory, models.sample_batch(), spec=copy.deepcopy(models.SPEC), **OPTIONS)
    assert not report.ok
    qualname = f"{models.MODULE}.{attr}"
    flagged = {h.qualname: h for h in report.attempts[0].helper_diagnostics if h.flagged}
    assert list(flagged) == [qualname], [h.qualname for h in report.attempts[0].helper_diagnostics]
    diag = flagged[qualname]
    assert diag.pattern == "per_system_reduction" and diag.consistency_passed is False
    assert diag.likely_remedy == {
        "kind": "method",
        "module_path": models.MODULE,
        "attr_name": attr,
        "atom_arg": 0,
        "atom_dim": 0,
    }

    fixed = MLIPSpec.coerce(copy.deepcopy(models.SPEC))
    fixed.distribution.third_party_helpers.append(HelperAdapter.from_dict(diag.likely_remedy))
    again = validate_on_cpu(factory, models.sample_batch(), spec=fixed, **OPTIONS)
    assert again.ok, again.next_action
    (wrapped,) = [h for h in again.attempts[0].helper_diagnostics if h.qualname == qualname]
    assert wrapped.already_wrapped and wrapped.consistency_passed is True and not wrapped.flagged
