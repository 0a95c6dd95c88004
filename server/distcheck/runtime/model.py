"""`DistributedModel`: runs a single-process wrapper on one rank's local batch under a spec."""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Mapping
from typing import Any

import torch

from ..batch import Batch
from ..spec import MLIPSpec
from .adapters import install_adapters
from .context import RankContext, use_context
from .dispatch import HandlerMode, ScatterObserver
from .local_batch import LocalBatch, make_local_batch
from .partition import Partition, partition_batch

__all__ = [
    "DEFAULT_SKIN",
    "DistributedModel",
    "WrapperError",
    "build_rank_context",
    "resolve_halo_width",
    "wrapper_attr",
]

DEFAULT_SKIN = 0.5
"""Å added to the halo width derived from the wrapper, so atoms right at the cutoff are covered."""


class WrapperError(TypeError):
    """The wrapper does not follow the contract (callable, returns a mapping of tensors, has a cutoff).

    `output` names the output at fault and `rank` the rank that returned it, when the error is about
    one output (None otherwise, or when found in one process). The message says what to change.
    """

    def __init__(self, message: str, *, output: str | None = None, rank: int | None = None) -> None:
        super().__init__(message)
        self.output = output
        self.rank = rank


def wrapper_attr(wrapper: Any, name: str) -> Any:
    """The wrapper's declared attribute `name` (`cutoff`, `num_interactions`, `distribution_spec`,
    `output_kinds`), None when it has none. A factory that returns a bound method (`model.forward`, a
    predict unit's `__call__`) declares them on the object the method is bound to, so that object is
    asked when the method itself has no such attribute. The ranks and the reference both read through
    this, so they agree on the cutoff."""
    value = getattr(wrapper, name, None)
    owner = getattr(wrapper, "__self__", None)
    if value is None and owner is not None and inspect.ismethod(wrapper):
        value = getattr(owner, name, None)
    return value


def resolve_halo_width(spec: MLIPSpec, wrapper: Any) -> float:
    """Halo depth in Å: the policy's explicit `halo_width`, else derived from the wrapper.

    `local`: `num_interactions × cutoff + skin`; `halo_correction` and `owned_complete`: `cutoff + skin`
    (one cutoff: per-layer exchanges keep the halo rows current); replicated: ∞.
    """
    policy = spec.distribution.policy
    if policy.kind == "replicated":
        return math.inf
    if policy.halo_width is not None:
        return float(policy.halo_width)
    cutoff = wrapper_attr(wrapper, "cutoff")
    if cutoff is None:
        raise WrapperError(
            f"{type(wrapper).__name__} has no `cutoff` attribute, so the halo width cannot be derived; "
            "add `self.cutoff = <Å>` (and `self.num_interactions`) to the wrapper or set "
            "distribution.policy.halo_width in the spec"
        )
    cutoff = float(cutoff.item() if isinstance(cutoff, torch.Tensor) else cutoff)
    depth = int(wrapper_attr(wrapper, "num_interactions") or 1)
    if policy.scatter_mode == "local":
        return depth * cutoff + DEFAULT_SKIN
    return cutoff + DEFAULT_SKIN


def build_rank_context(
    batch: Batch,
    spec: MLIPSpec,
    wrapper: Any,
    rank: int,
    world_size: int,
    group: Any = None,
    device: torch.device | None = None,
) -> tuple[RankContext, Partition]:
    """Partition `batch` (the whole batch) and return rank `rank`'s context and the partition."""
    policy = spec.distribution.policy
    halo = resolve_halo_width(spec, wrapper)
    part = partition_batch(batch, world_size, halo, replicated=policy.kind == "replicated")
    mine = part.ranks[rank]
    ctx = RankContext(
        rank=rank,
        world_size=world_size,
        num_global_atoms=batch.num_atoms,
        num_systems=batch.num_systems,
        local_ids=mine.local_ids.to(device or batch.device),
        owned_mask=mine.owned_mask.to(device or batch.device),
        scatter_mode="local" if policy.kind == "replicated" else policy.scatter_mode,
        halo_width=halo,
        system_reductions=spec.system_reductions,
        group=group,
        device=device or batch.device,
    )
    return ctx, part


class DistributedModel:
    """A wrapper bound to one rank: call it with the local batch to get that rank's outputs.

    While it runs, the handler mode, the dispatch observer and the spec's helper adapters are
    installed; all are removed on return, also on error.
    """

    def __init__(
        self,
        wrapper: Any,
        spec: MLIPSpec | Mapping[str, Any] | str,
        rank_context: RankContext,
        observe_dispatch: bool = True,
    ) -> None:
        if not callable(wrapper):
            raise WrapperError(f"model_factory returned {type(wrapper).__name__}, which is not callable")
        self.wrapper = wrapper
        self.spec = MLIPSpec.coerce(spec)
        self.ctx = rank_context
        self.observe_dispatch = observe_dispatch

    def local_batch(self, batch: Batch) -> LocalBatch:
        """This rank's `[owned | halo]` slice of the whole batch."""
        return make_local_batch(batch, self.ctx)

    def __call__(self, local: LocalBatch) -> dict[str, torch.Tensor]:
        """Run the wrapper on `local` under the spec; returns its outputs (rank-local rows)."""
        self.ctx.system_index = local.batch
        dist_spec = self.spec.distribution
        with contextlib.ExitStack() as stack:
            stack.enter_context(use_context(self.ctx))
            stack.enter_context(install_adapters(dist_spec.third_party_helpers, self.ctx))
            stack.enter_context(HandlerMode(self.ctx, dist_spec.custom_ops))
            if self.observe_dispatch and self.ctx.distributed:
                stack.enter_context(ScatterObserver(self.ctx, roots=[self.wrapper]))
            raw = self.wrapper(local)
        return check_outputs(raw, type(self.wrapper).__name__)


def check_outputs(raw: Any, wrapper_name: str) -> dict[str, torch.Tensor]:
    """The wrapper's outputs as a dict of tensors (keys as `str`), or a `WrapperError` naming the
    output that is not a tensor and saying what to return instead."""
    if not isinstance(raw, Mapping):
        raise WrapperError(
            f"{wrapper_name}.forward returned {type(raw).__name__}; it must return a mapping of output name "
            'to tensor, e.g. {"energy": e, "forces": f}'
        )
    out: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        if not isinstance(value, torch.Tensor):
            raise WrapperError(
                f"{wrapper_name}.forward returned {_type_name(value)} for output "
                f"{key!r}, not a torch.Tensor; return a tensor for every output (torch.as_tensor(value) for a "
                "number or a numpy array) or leave the output out of the mapping",
                output=str(key),
            )
        out[str(key)] = value
    return out


def _type_name(value: Any) -> str:
    """`float`, `NoneType`, `numpy.ndarray`: the type as a user would write it."""
    cls = type(value)
    module = cls.__module__.split(".")[0]
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
