"""The daemon validates what is on disk (the runner imports the model from disk, so the spec must be
the file too), and says which unsaved edits a validation did not see.

Unit tests of `end_message` and the refusal of a broken spec on disk run fast; the two validations start
the real daemon on a copy of `examples/` (see test_validate_flow.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from distcheck.lsp.runs import end_message
from distcheck.spec import MLIPSpec
from examples import helper_model

from .harness import copy_examples, lsp_session


def test_end_message_says_fix_available_and_what_was_not_validated() -> None:
    assert end_message("passed", "all outputs match", []) == "all outputs match"
    fixed = end_message("passed_after_fix", "Declare nbops.mol_sum as a reduction helper", [])
    assert fixed.startswith("fix available — apply the best spec: Declare nbops.mol_sum")
    for state in ("failed", "inconclusive", "error"):
        assert "fix available" not in end_message(state, "h", [])
    line = end_message("failed", "h", ["/ws/model.py", "/ws/model.distspec.json"])
    assert "unsaved edits in model.py, model.distspec.json were not" in line and "save and validate again" in line


def _spec_text(spec: dict[str, object]) -> str:
    return json.dumps(MLIPSpec.from_dict(spec).to_dict(), indent=4) + "\n"


@pytest.mark.procs
@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_a_broken_spec_on_disk_is_refused_even_when_the_buffer_is_fine(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec_file = ws / "helper_model.distspec.json"
    good = _spec_text(helper_model.SPEC)
    for broken in (good[:-4], good.replace('"version": 1', '"version": "one"')):  # bad JSON, bad spec
        spec_file.write_text(broken)
        async with lsp_session(ws) as s:
            spec_uri = s.open(spec_file, "json", version=1)
            s.change(spec_uri, good, version=2)  # fixed in the editor, not saved
            with pytest.raises(JsonRpcException) as refused:
                await s.command("distcheck.validate", "helper_model")
            message = str(refused.value)
            assert "on disk" in message and "save the file" in message, message


@pytest.mark.procs
@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_unsaved_edits_are_not_validated_and_the_report_says_so(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec_file, model = ws / "helper_model.distspec.json", ws / "helper_model.py"
    original, fixed = _spec_text(helper_model.SPEC), _spec_text(helper_model.CORRECT_SPEC)
    spec_file.write_text(original)
    async with lsp_session(ws) as s:
        spec_uri = s.open(spec_file, "json", version=1)
        model_uri = s.open(model, "python", version=1)
        # the fix in the buffer only: the spec on disk is validated, and fails as given
        s.change(spec_uri, fixed, version=2)
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", "helper_model")
        payload = await s.wait_report("helper_model", mark)
        report = payload["report"]
        assert report["attempts"][0]["passed"] is False, "the unsaved buffer was validated"
        assert report["state"] == "passed_after_fix"
        assert payload["unsaved"] == [spec_uri]
        (end,) = [m for k, m in s.progress_messages(started["token"], mark) if k == "end"]
        assert end is not None and end.startswith("fix available")
        assert "unsaved edits in helper_model.distspec.json were not" in end

        # saved: the fix is validated; an unsaved model edit (a comment) is named, the saved model runs
        spec_file.write_text(fixed)
        s.change(model_uri, model.read_text() + "\n# an edit not saved\n", version=2)
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", "helper_model")
        payload = await s.wait_report("helper_model", mark)
        assert payload["report"]["attempts"][0]["passed"] is True
        assert payload["report"]["state"] == "passed"
        assert payload["unsaved"] == [model_uri]
