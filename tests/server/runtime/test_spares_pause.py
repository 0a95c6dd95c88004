"""When a validation holds back the pool's background refill until its end (`ValidationSpares.start`):
on too few cores, and whenever it runs on a GPU, where a spare warming up would time-slice the device
with the validation's own processes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import pytest

from distcheck.processes.spares import prepared


class _Pool:
    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self.events.append("pause")
        try:
            yield
        finally:
            self.events.append("resume")

    def want(self, counts: Mapping[str, int], packages: Sequence[str] = ()) -> None:
        self.events.append(f"want {dict(counts)}")

    def settle(self) -> None:
        self.events.append("settle")


@pytest.mark.parametrize(
    ("devices", "roomy", "paused"),
    [
        (["cpu", "cpu"], True, False),
        (["cpu", "cpu"], False, True),
        (["cuda:0", "cuda:0"], True, True),
        (["cuda:0", "cuda:1"], True, True),
    ],
)
def test_refills_wait_for_the_end_on_few_cores_and_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, devices: list[str], roomy: bool, paused: bool
) -> None:
    pool = _Pool()
    monkeypatch.setattr(prepared, "pool", lambda: pool)
    monkeypatch.setattr(prepared, "roomy", lambda world_size: roomy)
    spares = prepared.ValidationSpares(
        "m.py:f", devices, 2, [], spec={"format": "distcheck-spec", "version": 1}, later_attempts=True
    )
    spares.start()
    assert ("pause" in pool.events) is paused and pool.events[-1].startswith("want")
    spares.close()
    assert pool.events[-1] == "settle" and ("resume" in pool.events) is paused
    if paused:
        assert pool.events[-2] == "resume", "the refill resumes when the validation ends"
