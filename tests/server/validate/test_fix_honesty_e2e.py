"""A halo widened before the first run is reported as a fix on every surface, and one that would make the
partition degenerate is not made (issue 32, items 1 and 2; the unit cases are `test_fix_honesty.py`).

The models (`sensitivity_models/shallow_depth.py`) declare fewer interactions than they run, under a
declared `local` scatter mode: the reference measures the real depth and the halo is widened to it before
any rank runs. That pass is a pass after a fix: state, `fix_applied`, the CLI headline and exit code, the
JUnit fixed-pass failure, the editor's spec-fix quick fix and the spec `--save-spec` writes all say so.
On a sample too short for the measured halo, the widening is skipped with its reason in the report.
A model that runs three layers but declares one and breaks `owned_complete` / `halo_correction`
(`fix_honesty_models.py`) is switched to `local` with the halo of its measured depth, which its
rationale states, and passes there.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from distcheck import cli, cli_exit, validate_on_cpu
from distcheck.lsp.actions import report_fixes
from distcheck.report.fixes import PRE_RUN_RULE
from distcheck.report.junit import junit_xml
from distcheck.runtime.model import DEFAULT_SKIN
from distcheck.spec import MLIPSpec
from examples import self_graph
from examples.structures import make_batch, periodic_slab_system

pytestmark = [pytest.mark.timeout(240), pytest.mark.procs]

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models", "shallow_depth.py")
CUTOFF = 3.0
HALO = ["distribution", "policy", "halo_width"]
SWITCHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fix_honesty_models.py")
BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1}


@pytest.mark.parametrize(("factory", "depth"), [("model_factory", 3), ("factory_two_declared_one", 2)])
def test_a_halo_widened_before_the_first_run_is_a_fix_everywhere(factory: str, depth: int) -> None:
    batch = make_batch([periodic_slab_system((3, 3, 24), seed=3)])
    report = validate_on_cpu(f"{MODELS}:{factory}", batch, world_size=2, timeout_sec=60)
    width = depth * CUTOFF + DEFAULT_SKIN
    assert report.verdict == "passed", report.next_action
    assert report.state == "passed_after_fix" and report.fix_applied is not None
    best = report.best_attempt
    assert best is not None and report.spec.distribution.policy.halo_width == pytest.approx(width)
    assert [(f.rule, f.path) for f in best.fixes][:1] == [(PRE_RUN_RULE, HALO)]
    assert report.fix_edits()[0] == {"op": "set", "path": HALO, "value": pytest.approx(width)}
    assert cli_exit.exit_code(report.state) == cli_exit.code_of("passed_after_fix")
    assert report.render_text().startswith("PASSED AFTER FIX"), report.render_text()
    assert junit_xml(report, "t").find(".//failure[@type='fixed-pass']") is not None
    fixes = [f for f in report_fixes(report, "/p/spec.json") if f["code"] == "spec-fix"]
    assert fixes and fixes[0]["edits"] == report.fix_edits() and fixes[0]["spec"] == report.spec.to_dict()


def test_a_pre_run_halo_that_would_be_degenerate_is_skipped_and_said() -> None:
    batch = make_batch([periodic_slab_system((3, 3, 16), seed=3)])  # 9.5 Å leaves a rank a whole system
    report = validate_on_cpu(f"{MODELS}:model_factory", batch, world_size=2, timeout_sec=60)
    first = report.attempts[0]
    assert [s.rule for s in first.skipped_fixes] == [PRE_RUN_RULE], first.skipped_fixes
    assert first.skipped_fixes[0].halo_width == pytest.approx(3 * CUTOFF + DEFAULT_SKIN)
    assert first.spec.distribution.policy.halo_width is None  # the declared depth's halo ran
    assert report.receptive_field is not None and report.receptive_field.halo_width_set is None
    assert not any(a.degenerate for a in report.attempts), report.next_action  # never degenerate by its own fix
    if not report.ok:
        assert "not tried" in report.next_action, report.next_action


@pytest.mark.parametrize(
    ("factory", "spec", "rule"),
    [
        ("dense_declared_one", BARE, "halo_correction_to_local"),
        ("dense_declared_one", self_graph.SPEC, "owned_complete_to_local"),
        ("degree_declared_one", self_graph.SPEC, "owned_complete_to_local"),
    ],
)
def test_a_switch_to_local_takes_the_measured_depth(factory: str, spec: dict[str, Any], rule: str) -> None:
    report = validate_on_cpu(
        f"{SWITCHED}:{factory}", self_graph.sample_batch(), spec=copy.deepcopy(spec), world_size=2, timeout_sec=60
    )
    switched = [a for a in report.attempts if a.rule == rule]
    width = 3 * CUTOFF + DEFAULT_SKIN  # three measured hops, one declared
    assert switched, [a.rule for a in report.attempts]
    assert switched[0].spec.distribution.policy.halo_width == pytest.approx(width)
    assert switched[0].halo_completeness.halo_width == pytest.approx(width)  # the halo it ran is the one it states
    assert f"{width:.4g} Å = 3 × 3 Å" in switched[0].rationale, switched[0].rationale
    assert report.ok and report.state == "passed_after_fix", report.next_action


def test_the_cli_says_the_pre_run_fix_and_saves_the_spec_it_passed_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "shallow.distspec.json"
    target = f"{MODELS}:factory_two_declared_one"
    code = cli.main(
        ["validate", target, "--sample", f"{MODELS}:sample_batch", "--world-size", "2", "--save-spec", str(saved)]
    )
    out, err = capsys.readouterr()
    width = 2 * CUTOFF + DEFAULT_SKIN
    assert code == cli_exit.code_of("passed_after_fix"), out + err
    assert out.startswith("PASSED AFTER FIX"), out
    assert f"  set distribution.policy.halo_width to {width:g}" in err, err
    assert MLIPSpec.load(saved).distribution.policy.halo_width == pytest.approx(width)
