"""`jobs.devices.named_devices`: the devices an option names outright, read without torch (the CLI's early
start and `resolve_device` share it)."""

from __future__ import annotations

from typing import Any

import pytest

from distcheck.jobs.devices import named_devices
from distcheck.option_check import ConfigError
from distcheck.options import CLI


@pytest.mark.parametrize(
    ("options", "named", "world_size"),
    [
        ({}, None, None),  # auto: torch decides
        ({"device": "auto"}, None, None),
        ({"device": "cpu"}, "cpu", None),
        ({"device": "cuda"}, "cuda", None),
        ({"device": "cuda:1", "world_size": 4}, "cuda:1", 4),
        ({"device": "cuda:0,cuda:1"}, ["cuda:0", "cuda:1"], 2),  # the list sets the world size
        ({"device": "cpu,cpu,cpu"}, "cpu", 3),
    ],
)
def test_the_devices_an_option_names(options: dict[str, Any], named: Any, world_size: int | None) -> None:
    assert named_devices(options, CLI) == named
    assert "device" not in options and options.get("world_size") == world_size


def test_a_list_that_disagrees_with_the_world_size_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        named_devices({"device": "cuda:0,cuda:1", "world_size": 3}, CLI)
    assert "names 2 devices but world_size is 3" in str(info.value)
    assert CLI.assign("world_size", 2) in info.value.hint
