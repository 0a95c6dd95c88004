"""The model's real receptive field, measured in the single-process reference, against the declared one.

The declared field is `cutoff × num_interactions`; `local` mode derives its halo from it, so a model
that declares one interaction too few loses its farthest hop at every domain boundary, an error that
small weights can keep below the tolerances. The measurement needs no knowledge of the model:

1. run the wrapper twice on the sample (the difference is its run-to-run noise, zero on the CPU; the
   reference's own forward, observed by a `SourceCapture`, is the first of the two);
2. displace one probe atom per system (two rounds of probes) by a small step that changes no edge;
3. see which atoms' per-atom quantities moved: the per-atom inputs of the per-system reductions the
   wrapper runs (the per-atom energies, when it sums them by the system index) and its per-node
   outputs;
4. count, in the neighbour graph of the cutoff, the hops from the probe to the farthest atom that
   moved: a per-atom quantity of depth L moves up to L hops away, an autograd-derived one (forces,
   gradients of a sum of depth-L terms) up to 2L, so the depth is at least that hop count (halved and
   rounded up for autograd outputs).

Hop counts never overestimate the depth (an edge-changing step is refused; a path of h hops in the
graph of the cutoff is needed for a change h hops away; only hops reached level by level count: an
atom that moved past a hop level where nothing moved was reached by a coupling that skips the graph,
such as code that reads a fixed row like `pos[0]`, named in the note and never read as depth), so
an under-declared depth is never a false alarm. When every atom of a system moves (a per-system
quantity fed back into every atom, e.g. charge equilibration), that observation bounds nothing and is
left out.

`measure_receptive_field` runs in the reference child once it has handed over its outputs, while the
first attempt's ranks run (`reference_field`); `receptive_record` and `apply_measured_field` run in
the validator.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..batch import Batch
from ..report import ReceptiveField
from ..runtime.model import DEFAULT_SKIN
from ..spec import MLIPSpec
from .receptive_graph import STEPS, CutoffGraph, NeighborMemo, adjacency, gapless_reach, hop_distances
from .trust_action import GRAPH_SKIP

__all__ = [
    "SCATTERS",
    "SourceCapture",
    "apply_measured_field",
    "effective_depth",
    "measure_receptive_field",
    "per_atom_quantities",
    "receptive_record",
]

PROBE_ROUNDS = 2
"""Rounds of probes (one displaced atom per system each)."""

MAX_FORWARD_SECONDS = 20.0
"""Above this reference forward time the measurement (four more forwards) is skipped."""


_T = torch.Tensor
SCATTERS = {
    torch.index_add,
    _T.index_add,
    _T.index_add_,
    torch.scatter_add,
    _T.scatter_add,
    _T.scatter_add_,
    torch.scatter_reduce,
    _T.scatter_reduce,
    _T.scatter_reduce_,
}
"""The torch functions that scatter rows by an index (out-of-place and in-place): a per-system
reduction by the system index is one of them."""


class SourceCapture(TorchFunctionMode):
    """Records (never changes) the per-atom source of every per-system reduction by the system index."""

    def __init__(self, num_atoms: int, num_systems: int) -> None:
        super().__init__()
        self.n, self.b = num_atoms, num_systems
        self.sources: list[torch.Tensor] = []

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in SCATTERS:
            target = args[0] if args else kwargs.get("input")
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            index = args[2] if len(args) > 2 else kwargs.get("index")
            src = args[3] if len(args) > 3 else kwargs.get("source", kwargs.get("src"))
            if (
                isinstance(target, torch.Tensor)
                and target.ndim >= 1
                and target.shape[0] == self.b
                and dim == 0
                and isinstance(index, torch.Tensor)
                and index.ndim >= 1
                and index.shape[0] == self.n
                and isinstance(src, torch.Tensor)
                and src.ndim >= 1
                and src.shape[0] == self.n
                and src.is_floating_point()
            ):
                self.sources.append(src.detach().clone())
        return out


def per_atom_quantities(
    sources: Sequence[torch.Tensor], outputs: Mapping[str, torch.Tensor], batch: Batch
) -> dict[str, torch.Tensor]:
    """The per-atom quantities one run of the wrapper gave: the per-system reduction `sources` a
    `SourceCapture` recorded and the per-node `outputs`, each as an (atoms, -1) float64 CPU tensor."""
    found: dict[str, torch.Tensor] = {}
    n = batch.num_atoms
    for i, src in enumerate(sources):
        found[f"source:{i}"] = src.reshape(n, -1).to(torch.float64).cpu()
    for name, value in outputs.items():
        v = value.detach()
        if v.ndim >= 1 and v.shape[0] == n and n != batch.num_systems and (v.is_floating_point() or v.is_complex()):
            real = torch.view_as_real(v) if v.is_complex() else v
            found[f"output:{name}"] = real.reshape(n, -1).to(torch.float64).cpu()
    return found


def _run(wrapper: Any, batch: Batch) -> dict[str, torch.Tensor]:
    """The wrapper's per-atom quantities on `batch`: its per-node outputs and per-system reduction sources."""
    from ..runtime.model import check_outputs

    capture = SourceCapture(batch.num_atoms, batch.num_systems)
    with capture:
        raw = wrapper(batch)
    return per_atom_quantities(capture.sources, check_outputs(raw, type(wrapper).__name__), batch)


def _probes(batch: Batch) -> list[list[int]]:
    """Per system, `PROBE_ROUNDS` atoms spread along its longest extent (median, then lower quartile)."""
    pos = batch.positions.detach().cpu().to(torch.float64)
    out: list[list[int]] = []
    for sl in batch.system_slices():
        if sl.stop - sl.start < 2:
            out.append([])
            continue
        p = pos[sl]
        axis = int(torch.argmax(p.max(0).values - p.min(0).values))
        order = torch.argsort(p[:, axis]).tolist()
        picks = [order[int(q * (len(order) - 1))] + sl.start for q in (0.5, 0.25)][:PROBE_ROUNDS]
        out.append(list(dict.fromkeys(picks)))
    return out


def _displaced(batch: Batch, atoms: Sequence[int], step: float) -> Batch:
    moved = batch.clone()
    pos = moved.positions.detach().clone()
    direction = torch.tensor([0.6, -0.48, 0.64], dtype=pos.dtype, device=pos.device)  # unit, off every axis
    for k in atoms:
        pos[k] = pos[k] + step * direction
    moved.positions = pos
    return moved


def _label(key: str, derived: Mapping[str, bool]) -> tuple[str, int]:
    """How an observation is named in the report, and how many hops one layer moves it."""
    kind, _, name = key.partition(":")
    if kind == "source":
        return f"the per-atom input of per-system reduction #{int(name) + 1}", 1
    if derived.get(name, False):
        return f"{name} (autograd-derived: 2 hops per layer)", 2
    return name, 1


def measure_receptive_field(
    wrapper: Any,
    batch: Batch,
    *,
    cutoff: float | None,
    derived: Mapping[str, bool],
    forward_seconds: float = 0.0,
    base: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Measure the depth in cutoff hops (see the module docstring); runs the wrapper 2 + `PROBE_ROUNDS`
    more times, one fewer when `base` holds the `per_atom_quantities` of a run on `batch` already made
    (the reference's own forward). Returns a JSON-ready dict `{"status", "cutoff", "measured_depth", "basis", "probes",
    "note"}` (`status` as `ReceptiveField.status`; `lower_bound` True when some quantity moved every
    atom, so the depth is only a lower bound); never raises: a failure is `not_measured` with the
    reason in `note`."""
    result: dict[str, Any] = {"status": "not_measured", "cutoff": cutoff, "measured_depth": None, "basis": ""}
    result["probes"] = 0
    if cutoff is None or not math.isfinite(cutoff) or cutoff <= 0:
        return {
            **result,
            "note": "the wrapper has no cutoff and asked for no neighbour list, so hops cannot be counted",
        }
    if forward_seconds > MAX_FORWARD_SECONDS:
        return {**result, "note": f"one forward takes {forward_seconds:.0f} s; measuring needs four more (skipped)"}
    try:
        return _measure(wrapper, batch, float(cutoff), derived, result, base)
    except Exception as exc:  # a model that cannot run on a displaced sample: say so, never fail the reference
        return {**result, "note": f"the wrapper failed on a displaced sample ({type(exc).__name__}: {exc})"}


def _measure(
    wrapper: Any,
    batch: Batch,
    cutoff: float,
    derived: Mapping[str, bool],
    result: dict[str, Any],
    given: Mapping[str, torch.Tensor] | None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    base = dict(given) if given is not None else _run(wrapper, batch)
    memo = NeighborMemo(batch)
    remembered = batch.clone()
    remembered.neighbor_list = memo  # type: ignore[method-assign]
    again = _run(wrapper, remembered)
    noise = {k: float((base[k] - again[k]).abs().max()) if base[k].numel() else 0.0 for k in base if k in again}
    scale = {k: float(base[k].abs().max()) if base[k].numel() else 0.0 for k in base}
    if any(noise[k] > 1e-6 * max(scale[k], 1e-30) for k in noise):
        return {
            **result,
            "note": "two identical runs of the wrapper differ, so what a displaced atom moves cannot be told",
        }
    if not base:
        return {**result, "note": "the wrapper has no per-node output and no per-system reduction to observe"}
    n = batch.num_atoms
    cutoff_graph = CutoffGraph(batch, cutoff)
    graph = adjacency(cutoff_graph.edges, n)
    slices = batch.system_slices()
    probes = _probes(batch)
    bounds: dict[str, int] = {}
    unbounded: set[str] = set()
    skips: dict[str, int] = {}  # quantity -> farthest hop of an atom that moved past an empty level
    used = 0
    for round_ in range(PROBE_ROUNDS):
        atoms = [p[round_] for p in probes if len(p) > round_]
        if not atoms:
            continue
        asked = sorted(memo.lists)  # the cutoffs the wrapper built neighbour lists for
        reuse = bool(asked) and asked[-1] <= cutoff
        moved = None
        for step in STEPS:
            if cutoff_graph.unchanged_by(atoms, step, asked if reuse else ()):
                moved = _displaced(batch, atoms, step)
                if reuse:
                    moved.neighbor_list = memo  # type: ignore[method-assign]
                break
        if moved is None:
            continue
        out = _run(wrapper, moved)
        used += len(atoms)
        hop_maps = {k: hop_distances(graph, k) for k in atoms}
        for key, before in base.items():
            after = out.get(key)
            if after is None or after.shape != before.shape:
                continue
            changed = ((after - before).abs() > 8.0 * noise.get(key, 0.0)).any(dim=1).numpy()
            for k in atoms:
                sl = next(s for s in slices if s.start <= k < s.stop)
                rows = np.flatnonzero(changed[sl]) + sl.start
                if rows.size == 0:
                    continue
                hops = hop_maps[k][rows]
                if rows.size == sl.stop - sl.start or (hops < 0).any():
                    unbounded.add(key)  # every atom moved: a per-system quantity feeds back, nothing is bounded
                    continue
                _, per_layer = _label(key, derived)
                reach = gapless_reach(hops)
                if reach < int(hops.max()):
                    skips[key] = max(skips.get(key, 0), int(hops.max()))
                bounds[key] = max(bounds.get(key, 0), math.ceil(reach / per_layer))
    result["probes"] = used
    result["seconds"] = time.perf_counter() - t0
    if used == 0:
        return {**result, "note": "every displacement tried changed the neighbour graph; nothing was measured"}
    if not bounds:
        if unbounded:
            return {
                **result,
                "status": "unbounded",
                "note": "displacing one atom moved every atom of its system (a per-system quantity feeds back into "
                "each atom), so no depth can be read off",
            }
        return {**result, "note": "displacing an atom moved no per-atom quantity"}
    key = max(bounds, key=lambda k: (bounds[k], k.startswith("source")))
    label, _ = _label(key, derived)
    result.update(status="measured", measured_depth=bounds[key], basis=label, lower_bound=bool(unbounded))
    parts = [f"{_label(k, derived)[0]}: {v} layer(s)" for k, v in bounds.items()]
    parts += [f"{_label(k, derived)[0]}: moved every atom" for k in sorted(unbounded)]
    note = f"{used} atom(s) displaced; " + "; ".join(parts)
    if unbounded:
        note += " (a lower bound: a per-system quantity feeds back into every atom, hiding the rest of the field)"
    for skipped, far in skips.items():
        note += (
            f"; {_label(skipped, derived)[0]} also moved {far} hop(s) away with nothing moving in between: "
            f"{GRAPH_SKIP} (code that reads a fixed row, such as pos[0]), not counted as depth"
        )
    result["note"] = note
    return result


def receptive_record(reference: Mapping[str, Any]) -> ReceptiveField | None:
    """The typed record of the reference's measurement (None when the reference carries none)."""
    raw = reference.get("receptive_field")
    if not isinstance(raw, Mapping):
        return None
    info = reference.get("wrapper") or {}
    declared = info.get("num_interactions")
    cutoff = raw.get("cutoff")
    measured = raw.get("measured_depth")
    depth = int(declared) if declared else 1
    return ReceptiveField(
        status=str(raw.get("status", "not_measured")),
        cutoff=None if cutoff is None else float(cutoff),
        declared_depth=None if declared is None else int(declared),
        declared_field=None if cutoff is None else float(cutoff) * depth,
        measured_depth=None if measured is None else int(measured),
        measured_field=None if measured is None or cutoff is None else float(cutoff) * int(measured),
        basis=str(raw.get("basis", "")),
        probes=int(raw.get("probes", 0)),
        under_declared=measured is not None and int(measured) > depth,
        note=str(raw.get("note", "")),
        lower_bound=bool(raw.get("lower_bound", False)),
    )


def effective_depth(reference: Mapping[str, Any]) -> int | None:
    """The depth the halo must cover: the declared `num_interactions`, or the measured depth when larger
    (None when neither is known)."""
    declared = (reference.get("wrapper") or {}).get("num_interactions")
    measured = (reference.get("receptive_field") or {}).get("measured_depth")
    known = [int(d) for d in (declared, measured) if d]
    return max(known) if known else None


def apply_measured_field(spec: MLIPSpec, field: ReceptiveField | None) -> tuple[MLIPSpec, str | None]:
    """The spec to run first and a note: under `local`, an under-declared depth sets `halo_width` to the
    measured field plus the skin, unless the spec gives `halo_width` already (only a prior sets it:
    inference never does), which is then only flagged (halo completeness reports it and auto-fix widens
    it). `field.halo_width_set` records the change."""
    policy = spec.distribution.policy
    if field is None or not field.under_declared or field.measured_field is None:
        return spec, None
    if policy.kind != "halo" or policy.scatter_mode != "local":
        return spec, None
    if policy.halo_width is not None:
        return spec, None
    width = round(field.measured_field + DEFAULT_SKIN, 6)
    fixed = spec.copy()
    fixed.distribution.policy.halo_width = width
    field.halo_width_set = width
    return fixed, (
        f"the wrapper declares num_interactions = {field.declared_depth or 1} ({field.declared_field:g} Å) but "
        f"the reference shows {field.measured_depth} hops ({field.measured_field:g} Å, from {field.basis}): "
        f"halo_width set to {width:g} Å before the first run"
    )
