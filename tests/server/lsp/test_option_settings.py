"""Out-of-bounds editor settings and command overrides: a clear message, never a crash or a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .harness import copy_examples, lsp_session

pytestmark = [pytest.mark.asyncio, pytest.mark.procs]

BAD = {"atol": -1, "timeoutSec": 0, "deadlineSec": -5, "worldSize": 0, "helperSampleEvery": 0}
EXPECTED = {
    "atol": "atol must be a finite number >= 0, got -1.0",
    "timeoutSec": "timeout_sec must be a finite number of seconds > 0, got 0.0",
    "deadlineSec": "deadline_sec must be a finite number of seconds > 0, got -5.0",
    "worldSize": "world_size must be at least 1, got 0",
    "helperSampleEvery": "helper_sample_every must be at least 1, got 0",
}


@pytest.mark.timeout(120)
async def test_bad_settings_warn_and_bad_overrides_are_refused(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    async with lsp_session(ws, settings=dict(BAD)) as s:
        for key, words in EXPECTED.items():

            def names_it(e: Any, key: str = key) -> bool:
                return bool(e.method == "window/showMessage" and f"distcheck.{key}" in e.params.message)

            warned = await s.rec.wait_for(names_it, timeout=10)
            assert warned.params.type == types.MessageType.Warning and words in warned.params.message
            assert "ignored until fixed" in warned.params.message
        assert await s.request("distcheck/targets", {})  # the daemon is alive and answers

        for override, words in [
            ({"rtol": -1}, "override rtol: rtol must be a finite number >= 0, got -1.0"),
            ({"timeoutSec": 0}, "override timeoutSec: timeout_sec must be a finite number of seconds > 0"),
            ({"deadline": -1}, "override deadline: deadline_sec must be a finite number of seconds > 0"),
            ({"worldSize": True}, "override worldSize must be an integer, got True"),
            ({"allowOversubscribe": "yes"}, "override allowOversubscribe must be true or false"),
        ]:
            with pytest.raises(JsonRpcException) as refused:
                await s.command("distcheck.validate", "pair_potential", override)
            assert refused.value.code == -32602 and words in refused.value.message, refused.value.message
