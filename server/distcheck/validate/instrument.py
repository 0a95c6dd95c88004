"""Instrumentation that runs inside each rank: helper trace and layer records (see processes.launch)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from ..runtime.context import RankContext
from .helpers import HelperTracer
from .layers import LayerRecorder

__all__ = ["MAX_RETURNED", "RankInstrumentation"]

MAX_RETURNED = 200
"""How many of the last modules that returned a crash record keeps."""


class RankInstrumentation:
    """Built from options `{"helper_packages", "helper_sample_every", "layer_diagnostic", "op_trace"}`
    (`op_trace`: the layer recorder also traces the torch ops, in a diagnostic run)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.tracer: HelperTracer | None = None
        self.layers: LayerRecorder | None = None

    @contextmanager
    def attach(self, wrapper: Any, ctx: RankContext, local: Any) -> Iterator[None]:
        """Trace helpers and record layers while the rank's forward runs."""
        with ExitStack() as stack:
            packages = self.options.get("helper_packages") or []
            if packages:
                self.tracer = HelperTracer(
                    packages,
                    int(self.options.get("helper_sample_every", 8)),
                    ctx.num_local,
                    ctx.num_systems,
                    owned_mask=ctx.owned_mask,
                )
                stack.enter_context(self.tracer.installed())
            if self.options.get("layer_diagnostic", True):
                self.layers = LayerRecorder(
                    wrapper,
                    ctx.num_local,
                    ctx.num_systems,
                    owned_mask=ctx.owned_mask,
                    trace_ops=bool(self.options.get("op_trace")),
                )
                stack.enter_context(self.layers.attached())
            yield

    def partial(self) -> dict[str, Any]:
        """What a crashed forward leaves (JSON-ready): the last `MAX_RETURNED` modules whose forward had
        returned, in call order (`{"modules": [...]}`; empty without layer hooks)."""
        returned = self.layers.returned if self.layers is not None else []
        return {"modules": [str(m) for m in returned[-MAX_RETURNED:]]}

    def collect(self) -> dict[str, Any]:
        """Helper calls, layer records and the op trace of this rank."""
        return {
            "helpers": self.tracer.collect() if self.tracer else {"calls": {}, "skipped": []},
            "layers": self.layers.collect() if self.layers else [],
            "ops": self.layers.op_records() if self.layers else {},
        }
