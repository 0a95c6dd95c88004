"""`rank_source.ValidationRanks` chooses resident ranks that serve a run, else prepared ones built for
exactly it, else new ones, and never leaves ranks it did not choose alive (no processes: stand-ins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from distcheck.processes.caller_context import CallerContext
from distcheck.processes.rank_source import NEW_RANKS, RankWant, ValidationRanks
from distcheck.runtime.run_result import RankLifecycle

WANT = RankWant("m:f", "off", 2, ("cpu", "cpu"), "gloo", {}, CallerContext())


@dataclass
class Kept:
    """A stand-in for `ResidentRanks` that serves runs of one factory."""

    factory: str | None
    released: int = 0

    def serves(self, want: RankWant) -> bool:
        return want.factory == self.factory

    def release(self) -> None:
        self.released += 1
        self.factory = None


@dataclass
class Built:
    """A stand-in for `PreparedRanks` built for one factory."""

    factory: str
    discarded: int = 0
    asked: list[tuple[Any, ...]] = field(default_factory=list)

    def matches(self, *args: Any) -> bool:
        self.asked.append(args)
        return args[0] == self.factory

    def discard(self) -> None:
        self.discarded += 1


def test_new_ranks_keep_nothing() -> None:
    choice = NEW_RANKS.choose(WANT)
    assert choice.lifecycle is RankLifecycle.FRESH and choice.keep_in is None and choice.prepared is None


def test_resident_ranks_that_serve_are_chosen_and_prepared_ones_discarded() -> None:
    kept, built = Kept("m:f"), Built("m:f")
    choice = ValidationRanks(resident=kept, prepared=built).choose(WANT)  # type: ignore[arg-type]
    assert choice.lifecycle is RankLifecycle.RESIDENT and choice.resident is kept and choice.keep_in is kept
    assert built.discarded == 1 and kept.released == 0


def test_resident_ranks_of_another_factory_are_released_before_prepared_ones_run() -> None:
    kept, built = Kept("other:f"), Built("m:f")
    choice = ValidationRanks(resident=kept, prepared=built).choose(WANT)  # type: ignore[arg-type]
    assert choice.lifecycle is RankLifecycle.PREPARED and choice.prepared is built and choice.keep_in is kept
    assert kept.released == 1 and built.discarded == 0
    assert built.asked == [("m:f", "off", 2, ("cpu", "cpu"), WANT.caller)]


@pytest.mark.parametrize("resident", [None, "kept"])
def test_prepared_ranks_built_for_another_run_are_discarded(resident: str | None) -> None:
    kept = Kept(None) if resident else None
    built = Built("other:f")
    choice = ValidationRanks(resident=kept, prepared=built).choose(WANT)  # type: ignore[arg-type]
    assert choice.lifecycle is RankLifecycle.FRESH and choice.prepared is None and choice.keep_in is kept
    assert built.discarded == 1


def test_prepared_ranks_serve_one_run_at_most() -> None:
    built = Built("m:f")
    source = ValidationRanks(prepared=built)  # type: ignore[arg-type]
    assert source.choose(WANT).lifecycle is RankLifecycle.PREPARED
    assert source.choose(WANT).lifecycle is RankLifecycle.FRESH
