"""Reading an undeclared `torch.ops` kernel off its shapes: which tensors are per-atom, per-edge,
per-system or replicated, whether the call aggregates across atoms or edges, and the
`distribution.custom_ops` entry that would route it.

A tensor's role comes from this rank's rows: `num_local` rows are per-atom, `num_systems` rows
per-system; an integer tensor whose values all index this rank's atoms (`[E]` or `[2, E]`) is an edge
index, and a tensor with `E` rows is per-edge; anything else is replicated. A kernel aggregates when
it returns per-system rows from per-atom or per-edge ones (atoms/edges → systems), or, under
`halo_correction` or `owned_complete`, per-atom rows from per-edge ones (edges → atoms; under
`owned_complete` no transform fits: its halo rows would need a refresh only). A kernel that maps per-atom rows
to per-atom rows (elementwise) or gathers atoms into edges aggregates nothing and needs no entry.

A tensor passed by keyword is placed at its index in the kernel's schema, the position the entry's
transforms use (the handler reaches it there too).

The entry: atoms → systems slices every per-atom argument to the owned rows and sums the per-system
outputs over ranks; edges → systems (each edge on one rank under `halo_correction`) only sums the
outputs; edges → atoms refreshes the per-atom arguments' halo rows and sends the per-atom outputs'
halo partials to their owners. Plain data out (`report.KernelCall` fields), so a rank's record
travels as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .context import RankContext

__all__ = ["kernel_call"]


def _flat(value: Any, prefix: str) -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    return []


def _arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any], positions: Mapping[str, int]
) -> list[tuple[str, torch.Tensor]]:
    """Every tensor argument under its position: a keyword at its index in the kernel's schema
    (`positions`), one the schema does not name under its keyword."""
    found = [t for i, a in enumerate(args) for t in _flat(a, str(i))]
    found += [t for k, v in kwargs.items() for t in _flat(v, str(positions[k]) if k in positions else k)]
    return sorted(found, key=lambda t: (not t[0].isdigit(), int(t[0]) if t[0].isdigit() else 0))


def _outputs(out: Any) -> list[tuple[str, torch.Tensor]]:
    if isinstance(out, torch.Tensor):
        return [("0", out)]
    if isinstance(out, (list, tuple)):
        return [t for i, o in enumerate(out) for t in _flat(o, str(i))]
    return []


def _is_index(t: torch.Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool and t.numel() > 0


def _edge_counts(ctx: RankContext, tensors: Sequence[torch.Tensor]) -> set[int]:
    """The edge counts the integer arguments show: `[2, E]` or `[E]` (E not the atom count) tensors
    whose values all index this rank's atoms."""
    n = ctx.num_local
    counts: set[int] = set()
    for t in tensors:
        if not _is_index(t) or t.ndim not in (1, 2) or (t.ndim == 2 and t.shape[0] != 2):
            continue
        rows = int(t.shape[-1])
        if rows == n and t.ndim == 1:
            continue
        if int(t.min()) >= 0 and int(t.max()) < n:
            counts.add(rows)
    return counts


def _role(ctx: RankContext, t: torch.Tensor, edges: set[int]) -> str:
    if t.ndim == 0:
        return "replicated"
    if t.ndim == 2 and t.shape[0] == 2 and int(t.shape[1]) in edges and _is_index(t):
        return "per_edge"
    rows = int(t.shape[0])
    if rows == ctx.num_local:
        return "per_atom"
    if rows in edges:
        return "per_edge"
    if rows == ctx.num_systems:
        return "per_system"
    return "replicated"


def _describe(ctx: RankContext, items: Sequence[tuple[str, torch.Tensor]], edges: set[int]) -> list[dict[str, Any]]:
    return [
        {"position": p, "role": _role(ctx, t, edges), "shape": [int(s) for s in t.shape], "dtype": str(t.dtype)[6:]}
        for p, t in items
    ]


def _floating(t: Mapping[str, Any]) -> bool:
    return str(t["dtype"]).startswith(("float", "bfloat", "half", "complex"))


def _aggregation(ins: Sequence[Mapping[str, Any]], outs: Sequence[Mapping[str, Any]], mode: str) -> str | None:
    in_roles = {t["role"] for t in ins}
    out_roles = {t["role"] for t in outs}
    float_in = {t["role"] for t in ins if _floating(t)}
    if "per_system" in out_roles:
        if "per_edge" in float_in and "per_atom" not in float_in:
            return "per_edge_to_per_system"
        if "per_atom" in in_roles:
            return "per_atom_to_per_system"
        if "per_edge" in in_roles:
            return "per_edge_to_per_system"
    if "per_atom" in out_roles and "per_edge" in in_roles and mode in ("halo_correction", "owned_complete"):
        return "per_edge_to_per_atom"
    return None


def _entry(
    name: str, aggregation: str, ins: Sequence[Mapping[str, Any]], outs: Sequence[Mapping[str, Any]], mode: str
) -> tuple[dict[str, Any] | None, str | None]:
    """The `custom_ops` entry for the call, or None and why no transform fits."""
    keyword = [t["position"] for t in ins if not t["position"].isdigit() and t["role"] in ("per_atom", "per_edge")]
    if keyword:
        return None, (
            f"the per-atom or per-edge argument {', '.join(keyword)} is passed by a keyword the kernel's schema "
            "does not name, so no custom_ops position reaches it: pass it by position, then validate again"
        )
    args: dict[str, str] = {}
    outputs: dict[str, str] = {}
    out_roles = {t["role"] for t in outs}
    if aggregation == "per_atom_to_per_system":
        if out_roles & {"per_atom", "per_edge"}:
            return None, (
                "it returns per-system rows and per-atom (or per-edge) rows from one call, and slicing its "
                "arguments to the owned atoms would change the latter: split it into one kernel per kind of output"
            )
        args = {t["position"]: "slice_owned" for t in ins if t["role"] == "per_atom"}
        outputs = {t["position"]: "all_reduce_sum" for t in outs if t["role"] == "per_system"}
    elif aggregation == "per_edge_to_per_system":
        if mode != "halo_correction":
            return None, (
                f'under scatter_mode "{mode}" each rank also holds edges among its halo atoms, so a sum over '
                'edges counts them twice: use scatter_mode "halo_correction" (each edge on one rank), then '
                "declare the kernel"
            )
        outputs = {t["position"]: "all_reduce_sum" for t in outs if t["role"] == "per_system"}
    elif aggregation == "per_edge_to_per_atom" and mode == "owned_complete":
        return None, (
            'under scatter_mode "owned_complete" its owned rows are complete but its halo rows are never '
            "refreshed, and no custom_ops output transform only refreshes them: use scatter_mode "
            '"halo_correction" and declare the kernel, or compute it in Python (index_add) so the runtime refreshes it'
        )
    elif aggregation == "per_edge_to_per_atom":
        args = {t["position"]: "gather_inputs" for t in ins if t["role"] == "per_atom" and _floating(t)}
        for t in outs:
            if t["role"] == "per_atom":
                outputs[t["position"]] = "scatter_outputs"
            elif t["role"] == "per_system":
                outputs[t["position"]] = "all_reduce_sum"
    entry = {"op": name, "arg_transforms": _ordered(args), "output_transforms": _ordered(outputs)}
    return entry, None


def _ordered(transforms: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted(transforms.items(), key=lambda kv: int(kv[0])))


def kernel_call(
    ctx: RankContext,
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    out: Any,
    positions: Mapping[str, int] | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """`(aggregation, KernelCall fields)` of one call of the undeclared kernel `name` on this rank, or
    None when it aggregates nothing across atoms or edges (elementwise, a gather, replicated data).
    `positions`: each keyword argument's index in the kernel's schema (`call_args.op_positions`), so a
    tensor passed by keyword gets the entry's position key; one without is refused by name."""
    if ctx.num_local <= ctx.num_systems:
        return None  # rows cannot tell atoms from systems
    given = _arguments(args, kwargs, positions or {})
    returned = _outputs(out)
    with ctx.handlers_suspended():
        edges = _edge_counts(ctx, [t for _, t in given]) - {ctx.num_systems}
        ins, outs = _describe(ctx, given, edges), _describe(ctx, returned, edges)
    aggregation = _aggregation(ins, outs, ctx.scatter_mode)
    if aggregation is None:
        return None
    entry, why = _entry(name, aggregation, ins, outs, ctx.scatter_mode)
    return aggregation, {"args": ins, "outputs": outs, "entry": entry, "no_entry": why}
