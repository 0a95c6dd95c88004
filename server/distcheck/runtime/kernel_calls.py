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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .context import RankContext

__all__ = ["Rerun", "kernel_call", "mutates"]


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


def _aggregation(
    ins: Sequence[Mapping[str, Any]], outs: Sequence[Mapping[str, Any]], mode: str, other: Sequence[str] = ()
) -> str | None:
    in_roles = {t["role"] for t in ins}
    out_roles = {t["role"] for t in outs}
    float_in = {t["role"] for t in ins if _floating(t)}
    if other and "per_system" not in out_roles:
        # rows in another index space (k-vectors, a histogram): a total over the atoms (or edges) in disguise
        return "per_atom_total" if "per_atom" in float_in else "per_edge_to_per_system"
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
    name: str,
    aggregation: str,
    ins: Sequence[Mapping[str, Any]],
    outs: Sequence[Mapping[str, Any]],
    mode: str,
    other: Sequence[str] = (),
) -> tuple[dict[str, Any] | None, str | None]:
    """The `custom_ops` entry for the call, or None and why no transform fits. `other`: the positions of
    outputs in another index space, summed over ranks like per-system ones."""
    summed = {t["position"] for t in outs if t["role"] == "per_system"} | set(other)
    keyword = [t["position"] for t in ins if not t["position"].isdigit() and t["role"] in ("per_atom", "per_edge")]
    if keyword:
        return None, (
            f"the per-atom or per-edge argument {', '.join(keyword)} is passed by a keyword the kernel's schema "
            "does not name, so no custom_ops position reaches it: pass it by position, then validate again"
        )
    args: dict[str, str] = {}
    outputs: dict[str, str] = {}
    out_roles = {t["role"] for t in outs}
    if aggregation in ("per_atom_to_per_system", "per_atom_total"):
        if out_roles & {"per_atom", "per_edge"}:
            return None, (
                "it returns per-system (or other summed) rows and per-atom (or per-edge) rows from one call, and "
                "slicing its arguments to the owned atoms would change the latter: split it into one kernel per "
                "kind of output"
            )
        args = {t["position"]: "slice_owned" for t in ins if t["role"] == "per_atom"}
        outputs = {position: "all_reduce_sum" for position in summed}
    elif aggregation == "per_edge_to_per_system":
        if mode != "halo_correction":
            return None, (
                f'under scatter_mode "{mode}" each rank also holds edges among its halo atoms, so a sum over '
                'edges counts them twice: use scatter_mode "halo_correction" (each edge on one rank), then '
                "declare the kernel"
            )
        outputs = {position: "all_reduce_sum" for position in summed}
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


Rerun = Callable[[Sequence[Any], Mapping[str, Any]], Any]
"""The kernel called again with other arguments (no side effects: a kernel that mutates none)."""


def mutates(func: Any) -> bool:
    """Whether the `torch.ops` kernel `func` may write to an argument (any overload's schema says so),
    or has no schema to say it does not: such a kernel is never called again (`Rerun`)."""
    overloads: list[Any] = [func] if isinstance(func, torch._ops.OpOverload) else []
    if isinstance(func, torch._ops.OpOverloadPacket):
        names: list[str] = func.overloads()  # type: ignore[no-untyped-call]
        overloads = [getattr(func, n, None) for n in names]
    schemas = [o._schema for o in overloads if o is not None and hasattr(o, "_schema")]
    if not schemas:
        return True
    return any(a.alias_info is not None and a.alias_info.is_write for sch in schemas for a in sch.arguments)


def _other_space(
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    positions: Mapping[str, int],
    ins: Sequence[Mapping[str, Any]],
    outs: Sequence[Mapping[str, Any]],
    returned: Sequence[tuple[str, torch.Tensor]],
    rerun: Rerun | None,
) -> list[str]:
    """The positions of the outputs in an index space that is neither atoms, edges nor systems (a role
    of `replicated` by rows) whose values change when the per-atom and per-edge floating arguments do:
    a sum over atoms or edges into that space. Found by calling the kernel once more with those
    arguments changed ([] without `rerun`, or when no such output or argument exists)."""
    candidates = [(t["position"], r) for t, (_, r) in zip(outs, returned) if t["role"] == "replicated" and _floating(t)]
    changing = {t["position"] for t in ins if t["role"] in ("per_atom", "per_edge") and _floating(t)}
    if rerun is None or not candidates or not changing:
        return []
    positional = [
        v * 1.25 + 0.5 if str(i) in changing and isinstance(v, torch.Tensor) else v for i, v in enumerate(args)
    ]
    keyword = {
        k: v * 1.25 + 0.5 if str(positions.get(k, k)) in changing and isinstance(v, torch.Tensor) else v
        for k, v in kwargs.items()
    }
    try:
        again = dict(_outputs(rerun(positional, keyword)))
    except Exception:  # a kernel that refuses other values: no evidence either way
        return []
    found = []
    for position, before in candidates:
        after = again.get(position)
        if after is None or after.shape != before.shape or not torch.equal(after, before):
            found.append(position)
    return found


def kernel_call(
    ctx: RankContext,
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    out: Any,
    positions: Mapping[str, int] | None = None,
    rerun: Rerun | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """`(aggregation, KernelCall fields)` of one call of the undeclared kernel `name` on this rank, or
    None when it aggregates nothing across atoms or edges (elementwise, a gather, replicated data).
    `positions`: each keyword argument's index in the kernel's schema (`call_args.op_positions`), so a
    tensor passed by keyword gets the entry's position key; one without is refused by name. With
    `rerun`, an output in any other index space (k-vectors, a histogram) that depends on per-atom or
    per-edge data is a sum over them too (`_other_space`): a total over atoms (or, from edges alone,
    an edge sum) whose entry sums that output over ranks."""
    if ctx.num_local <= ctx.num_systems:
        return None  # rows cannot tell atoms from systems
    given = _arguments(args, kwargs, positions or {})
    returned = _outputs(out)
    with ctx.handlers_suspended():
        edges = _edge_counts(ctx, [t for _, t in given]) - {ctx.num_systems}
        ins, outs = _describe(ctx, given, edges), _describe(ctx, returned, edges)
        with torch.no_grad():
            other = _other_space(args, kwargs, positions or {}, ins, outs, returned, rerun)
    aggregation = _aggregation(ins, outs, ctx.scatter_mode, other)
    if aggregation is None:
        return None
    entry, why = _entry(name, aggregation, ins, outs, ctx.scatter_mode, other)
    return aggregation, {"args": ins, "outputs": outs, "entry": entry, "no_entry": why}
