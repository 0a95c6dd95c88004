"""A toolkit method helper (`kind: "method"`, mode `wrap`) is left out of an imported spec: the toolkit
calls its replacement as `(original, self, ...)` inside its own distributed context, which distcheck
has no equivalent of. The note must say exactly what to write instead: every entry it quotes is
accepted by distcheck's reader as written (its placeholder filled), names the toolkit's class and
method as `"Class.method"`, and the reduction entry it proposes for a per-system sum makes a model
that sums through that method pass end to end (world size 2, gloo)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import method_kind_models as models
import pytest

from distcheck import validate_on_cpu
from distcheck.spec import HelperAdapter, MLIPSpec, anchor_spec_from_text, validate_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "anchor_specs"
METHODS = "examples.thirdparty.methods"


def _toolkit_text(replacement: str | None, module: str = "aimnet.modules.aev", cls: str = "ConvSV") -> str:
    doc: dict[str, Any] = json.loads((FIXTURES / "mpnn_halo.json").read_text(encoding="utf-8"))
    doc["core"]["third_party_helpers"] = [
        {
            "kind": "method",
            "module_path": module,
            "class_name": cls,
            "method_name": "forward",
            "replacement": replacement,
            "mode": "wrap",
        }
    ]
    doc["output_kinds"] = [["energy", "per_graph"], ["forces", "per_node"]]
    return json.dumps(doc, indent=2)


def _quoted_entries(message: str) -> list[dict[str, Any]]:
    """Every JSON object the note quotes that is a helper entry."""
    found = []
    for text in re.findall(r"\{\"kind\": [^{}]*\}", message):
        found.append(json.loads(text))
    return found


@pytest.mark.parametrize("replacement", ["mywrapper.dd:rewrap", None], ids=["wrap", "declared_only"])
def test_the_note_quotes_entries_distcheck_accepts_as_written(replacement: str | None) -> None:
    result = anchor_spec_from_text(_toolkit_text(replacement), file="toolkit.json")
    assert result.spec.distribution.third_party_helpers == [], "a toolkit wrap is not converted"
    (note,) = result.unmapped
    assert note.path == "core.third_party_helpers[0].replacement" and note.lossy
    entries = _quoted_entries(note.message)
    assert [sorted(e) for e in entries] == [
        ["atom_arg", "atom_dim", "attr_name", "kind", "module_path"],
        ["attr_name", "kind", "module_path", "replacement"],
    ], note.message
    home = replacement.split(":")[0] if replacement else "package.module"
    assert entries[1]["replacement"] == f"{home}:NAME"
    for entry in entries:
        assert (entry["kind"], entry["module_path"], entry["attr_name"]) == (
            "method",
            "aimnet.modules.aev",
            "ConvSV.forward",
        )
        entry = {**entry, "replacement": f"{home}:owned_forward"} if "replacement" in entry else entry
        doc = {"format": "distcheck-spec", "version": 1, "distribution": {"third_party_helpers": [entry]}}
        assert validate_json(json.dumps(doc)) == [], entry
    assert "refresh_neighbors" in note.message and "no entry" in note.message
    assert '"distribution": {"torchscript": "eager"}' in note.message
    if replacement is None:
        assert "--watch aimnet" in note.message


@pytest.mark.procs
def test_the_proposed_reduction_entry_makes_a_method_summing_model_pass() -> None:
    """The toolkit wrapped `MolSum.forward` (a per-system sum inside TorchScript); the note's first entry,
    added to the imported spec as written, gives the single-process outputs on two ranks."""
    result = anchor_spec_from_text(_toolkit_text("mywrapper.dd:rewrap", module=METHODS, cls="MolSum"))
    (note,) = result.unmapped
    first = _quoted_entries(note.message)[0]
    assert first == {
        "kind": "method",
        "module_path": METHODS,
        "attr_name": "MolSum.forward",
        "atom_arg": 0,
        "atom_dim": 0,
    }
    options: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "auto_fix": False}
    without = validate_on_cpu(models.factory_module_forward, models.sample_batch(), spec=result.spec, **options)
    assert not without.ok, "the imported spec alone lacks the adapter"
    spec = MLIPSpec.from_json(result.spec.to_json())
    spec.distribution.third_party_helpers.append(HelperAdapter.from_dict(copy.deepcopy(first)))
    report = validate_on_cpu(models.factory_module_forward, models.sample_batch(), spec=spec, **options)
    assert report.ok, report.next_action
