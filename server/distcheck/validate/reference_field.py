"""The receptive-field measurement, off the validation's critical path.

The reference child hands over its outputs first (`reference.pt`) and only then measures the
receptive field (`FieldProbe.measure`, written to `FIELD_FILE`), so the first attempt's ranks run
while it measures. The validator collects the measurement with `PendingField.collect` once the first
attempt's ranks have run; an initial spec the measurement would have changed (inference reads the
measured depth, `apply_measured_field` widens an under-declared halo) is then run again, so the
verdict is the one a measurement made first would give. A measurement that cannot finish (the child
failed or ran past the reference's time bound) is `not_measured` with the reason; it never fails the
validation.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..batch import Batch
from ..processes import run_dirs
from ..processes.reaper import retire
from ..processes.supervise import supervise
from ..runtime.errors import DistributedError
from ..runtime.model import wrapper_attr
from .receptive import measure_receptive_field, per_atom_quantities

__all__ = ["FIELD_FILE", "FieldProbe", "PendingField"]

FIELD_FILE = "receptive.pt"
"""The reference child's measurement, beside its `reference.pt`."""


@dataclass
class FieldProbe:
    """What the reference child keeps from its forward to measure the field after handing over its
    outputs: the `wrapper`, the pristine sample (`batch_state`) and `device`, the neighbour `cutoff`,
    which outputs are autograd-`derived`, the forward's duration and its per-atom reduction `sources`
    and `outputs` (so the forward is the measurement's first run)."""

    wrapper: Any
    batch_state: dict[str, Any]
    device: torch.device
    cutoff: float | None
    derived: Mapping[str, bool]
    forward_seconds: float
    sources: Sequence[torch.Tensor]
    outputs: Mapping[str, torch.Tensor]

    def measure(self) -> dict[str, Any]:
        """`measure_receptive_field` on the sample, its seconds in `"seconds_total"`; never raises. Hops
        are counted in the graph of the cutoff the wrapper declares (the halo is derived from it), or
        of the neighbour `cutoff` when it declares none."""
        t0 = time.perf_counter()
        batch = Batch.from_state(self.batch_state).to(self.device)
        cutoff = _declared_cutoff(self.wrapper) or self.cutoff
        base = per_atom_quantities(self.sources, self.outputs, batch) if cutoff else None
        measured = measure_receptive_field(
            self.wrapper,
            batch,
            cutoff=cutoff,
            derived=self.derived,
            forward_seconds=self.forward_seconds,
            base=base,
        )
        measured["seconds_total"] = time.perf_counter() - t0
        return measured


def _declared_cutoff(wrapper: Any) -> float | None:
    """The wrapper's declared `cutoff` (Å), None when it declares no positive finite one."""
    try:
        value = wrapper_attr(wrapper, "cutoff")
        cutoff = float(value.item() if isinstance(value, torch.Tensor) else value) if value is not None else None
    except (TypeError, ValueError, RuntimeError):
        return None
    return cutoff if cutoff is not None and math.isfinite(cutoff) and cutoff > 0 else None


def _not_measured(cutoff: float | None, note: str) -> dict[str, Any]:
    return {"status": "not_measured", "cutoff": cutoff, "measured_depth": None, "basis": "", "probes": 0, "note": note}


@dataclass
class PendingField:
    """The reference child still measuring, owned by the validator: `collect` waits for the
    measurement (once), `close` stops the child and removes its run directory (idempotent; a
    `with` block closes it)."""

    procs: list[Any]
    run_dir: run_dirs.RunDir
    deadline: float
    """`time.perf_counter()` past which the measurement is abandoned (the reference run's bound)."""
    cutoff: float | None = None
    device: str = "cpu"
    """Where the child runs (`reaper.retire` waits for a CUDA child in the background)."""
    _result: dict[str, Any] | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)
    waited: float = field(default=0.0, init=False)
    """Seconds `collect` waited for the child (0 when the field was there already)."""

    def collect(self) -> dict[str, Any]:
        """The measurement (`measure_receptive_field`'s dict), waiting for the child if it is still
        measuring; `not_measured` with the reason when it failed or ran out of time."""
        if self._result is not None:
            return self._result
        if not self.procs:  # closed before the measurement was asked for
            self._result = _not_measured(self.cutoff, "the validation ended before the measurement finished")
            return self._result
        t0 = time.perf_counter()
        path = os.path.join(self.run_dir.path, FIELD_FILE)
        try:
            supervise(
                self.procs,
                self.run_dir.path,
                timeout_sec=max(self.deadline - t0, 0.0),
                t_start=t0,
                has_result=lambda _: os.path.exists(path),
                who=lambda _: "the reference run",
                rank_of=lambda _: -1,
                label="the reference run's receptive-field measurement",
            )
            result: dict[str, Any] = torch.load(path, weights_only=True)
        except DistributedError as err:  # RankTimeout too
            failure = err.failures[0] if err.failures else None
            why = f"{failure.type}: {failure.message}" if failure is not None else str(err)
            result = _not_measured(self.cutoff, f"the measurement did not finish ({why})")
        self.waited = time.perf_counter() - t0
        self._result = result
        self.close()
        return result

    def abandon(self) -> None:
        """The measurement is not needed: stop the child now, so it stops using the device."""
        if self._result is None:
            self._result = _not_measured(self.cutoff, "the measurement was not needed")
        self.close()

    def close(self) -> None:
        """Stop the child (if still running) and remove its run directory, once (`reaper.retire`: for a
        CUDA child both happen in the background)."""
        if self._closed:
            return
        self._closed = True
        procs, self.procs = self.procs, []
        retire(procs, [self.device], self.run_dir.remove)

    def __enter__(self) -> PendingField:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
