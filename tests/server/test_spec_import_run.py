"""A spec imported from nvalchemi-toolkit's format drives real ranks: the converted spec of the toolkit's
`SPEC_MPNN_HALO` (scatter mode `halo_correction`), and of a halo-unaware backbone declared with
`scatter_mode: "local"`, match the single-process run atom by atom (world size 2, gloo, fp64)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch

from distcheck import run_distributed
from distcheck.spec import import_anchor_spec

pytestmark = pytest.mark.procs

FIXTURES = Path(__file__).parent / "fixtures" / "anchor_specs"


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-300)


@pytest.mark.parametrize(("example", "scatter"), [("mpnn", "halo_correction"), ("unaware_model", "local")])
def test_an_imported_spec_runs_the_example_as_in_one_process(example: str, scatter: str, tmp_path: Path) -> None:
    module = importlib.import_module(f"examples.{example}")
    doc = json.loads((FIXTURES / "mpnn_halo.json").read_text())
    doc["core"]["policy"]["scatter_mode"] = scatter
    doc["output_kinds"] = [["energy", "per_graph"], ["forces", "per_node"]]
    path = tmp_path / "toolkit.json"
    path.write_text(json.dumps(doc, indent=2))
    result = import_anchor_spec(path)
    assert result.exact
    batch = module.sample_batch()
    run = run_distributed(module.model_factory, batch, result.spec, world_size=2, timeout_sec=60)
    ref = {k: v.detach() for k, v in module.model_factory()(batch).items()}
    assert set(run.outputs) == set(ref)
    for key, value in ref.items():
        assert _max_rel(run.outputs[key], value) <= 1e-10, key
