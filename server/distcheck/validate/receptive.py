"""The model's real receptive field, measured in the single-process reference, against the declared one.

The declared field is `cutoff × num_interactions`; `local` mode derives its halo from it, so a model
that declares one interaction too few loses its farthest hop at every domain boundary, an error that
small weights can keep below the tolerances. The measurement needs no knowledge of the model:

1. run the wrapper twice on the sample, the second time rigidly translated by the step (the
   reference's own forward, observed by a `SourceCapture`, is the first of the two): no distance
   changes, so what differs is round-off and run-to-run noise. Each per-atom quantity's **noise floor**
   is the larger of that difference and its dtype's round-off (`sensitivity.epsilon_floor`, the
   definition of the floor "suspicious" is judged against); an atom *moved* when it changed by more
   than `MOVED_RATIO` × that floor. The floor applies only where the model spreads round-off: when no
   probe's displacement (step 2) changed a single bit in the far half of its system's hop levels,
   every change is the displacement's own (a far hop of weight 1e-7 still counts), and the floor is 0.
   A quantity a translation moves by far more than round-off (the positions themselves) is not
   observed;
2. displace one probe atom per system (two rounds of probes) by the largest step that changes no edge
   (`LOW_PRECISION_STEPS`, up to 0.1 Å, when a quantity is float32 or less: a far hop's change grows
   with the step and must stand above that dtype's round-off);
3. see which atoms' per-atom quantities moved: the per-atom inputs of the per-system reductions the
   wrapper runs (the per-atom energies, when it sums them by the system index) and its per-node
   outputs;
4. count, in the neighbour graph of the declared cutoff, the hops from the probe to the farthest atom
   that moved (the **reach in hops**), and the distance to it (the **reach in Å**, nearest periodic
   image): a per-atom quantity of depth L moves up to L hops away, an autograd-derived one (forces,
   gradients of a sum of depth-L terms) up to 2L, so the depth is at least that hop count (halved and
   rounded up for autograd outputs);
5. when that depth exceeds the declared one, decide which declaration is short (`receptive_reach`):
   the first round's probes are displaced again in the sample without the atoms within the declared
   cutoff of them (`receptive_isolated`), where hops of that cutoff carry nothing. An atom that still
   moves names the cutoff (remedy "cutoff", with the cutoff the reach implies, and the field is
   declared depth × that cutoff); none, the depth (remedy "depth"). A depth is thus advised only where
   hops explain the reach, and a reach in Å that hops of the declared cutoff do not carry names the
   cutoff.

A float32 model whose far hop changes a value by less than its round-off reads shallower, never
deeper: the floor only ever hides a change.

Hop counts never overestimate the depth (an edge-changing step is refused; a path of h hops in the
graph of the cutoff is needed for a change h hops away; only hops reached level by level count: an
atom that moved past a hop level where nothing moved was reached by a coupling that skips the graph,
such as code that reads a fixed row like `pos[0]`, named in the note and never read as depth), so
an under-declared depth is never a false alarm. When every atom of a system moves (a per-system
quantity fed back into every atom, e.g. charge equilibration), that observation bounds nothing and is
left out.

`measure_receptive_field` runs in the reference child once it has handed over its outputs, while the
first attempt's ranks run (`reference_field`); `receptive_record` and `apply_measured_field`
(`field_record`, re-exported here) run in the validator.
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
from ..report import FEEDBACK_HIDES_FIELD
from ..runtime.model import wrapper_attr
from .field_record import apply_measured_field, effective_depth, receptive_record
from .receptive_floor import low_precision, roundoff_floors, spreads_roundoff
from .receptive_graph import (
    LOW_PRECISION_STEPS,
    STEPS,
    CutoffGraph,
    NeighborMemo,
    adjacency,
    choose_probes,
    distances_from,
    gapless_reach,
    hop_distances,
    probe_candidates,
)
from .receptive_isolated import reach_words, read_past_cutoff
from .receptive_reach import Observation, Weighed, decide, suggested_cutoff, weigh
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

PROBE_CANDIDATES = 16
"""Atoms tried per system and round for a probe the step cannot carry across a cutoff."""

MAX_FORWARD_SECONDS = 20.0
"""Above this reference forward time the measurement (four more forwards) is skipped."""

MOVED_RATIO = 8.0
"""A per-atom quantity moved when it changed by more than this many times its noise floor."""


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
    `SourceCapture` recorded and the per-node `outputs`, each as an (atoms, -1) CPU tensor of its own
    dtype (a complex one as its real and imaginary parts), so its round-off can be told."""
    found: dict[str, torch.Tensor] = {}
    n = batch.num_atoms
    for i, src in enumerate(sources):
        found[f"source:{i}"] = src.reshape(n, -1).cpu()
    for name, value in outputs.items():
        v = value.detach()
        if v.ndim >= 1 and v.shape[0] == n and n != batch.num_systems and (v.is_floating_point() or v.is_complex()):
            real = torch.view_as_real(v) if v.is_complex() else v
            found[f"output:{name}"] = real.reshape(n, -1).cpu()
    return found


def _run(wrapper: Any, batch: Batch) -> dict[str, torch.Tensor]:
    """The wrapper's per-atom quantities on `batch`: its per-node outputs and per-system reduction sources."""
    from ..runtime.model import check_outputs

    capture = SourceCapture(batch.num_atoms, batch.num_systems)
    with capture:
        raw = wrapper(batch)
    return per_atom_quantities(capture.sources, check_outputs(raw, type(wrapper).__name__), batch)


def _displaced(batch: Batch, atoms: Sequence[int], step: float) -> Batch:
    moved = batch.clone()
    pos = moved.positions.detach().clone()
    direction = torch.tensor([0.6, -0.48, 0.64], dtype=pos.dtype, device=pos.device)  # unit, off every axis
    for k in atoms:
        pos[k] = pos[k] + step * direction
    moved.positions = pos
    return moved


def _translated(batch: Batch, step: float) -> Batch:
    """`batch` with every atom displaced by `step` along the probes' direction: a rigid translation,
    which changes no distance, so what it changes is round-off (and run-to-run noise)."""
    return _displaced(batch, range(batch.num_atoms), step)


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
    (the reference's own forward), and twice more on the isolated probes when the reach is deeper than
    declared (step 5). `cutoff` is the declared one (hops are counted in its graph); the
    declared depth is the wrapper's `num_interactions`. Returns a JSON-ready dict `{"status",
    "cutoff", "measured_depth", "basis", "probes", "note"}` (`status` as `ReceptiveField.status`;
    `lower_bound` True when some quantity moved every atom, so the depth is only a lower bound), and
    when measured `reach_hops`, `reach_angstrom`, `noise_floor`, `remedy`, `field` and
    `suggested_cutoff` as `ReceptiveField`'s (`measured_depth` is the declared depth when the cutoff
    is the remedy); never raises: a failure is `not_measured` with the reason in `note`."""
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
    raw = dict(given) if given is not None else _run(wrapper, batch)
    if not raw:
        return {**result, "note": "the wrapper has no per-node output and no per-system reduction to observe"}
    steps = LOW_PRECISION_STEPS if low_precision(raw) else STEPS
    base = {k: v.to(torch.float64) for k, v in raw.items()}
    memo = NeighborMemo(batch)
    shifted = _translated(batch, steps[0])
    shifted.neighbor_list = memo  # type: ignore[method-assign]  # a translation changes no pair
    again = {k: v.to(torch.float64) for k, v in _run(wrapper, shifted).items()}
    noise, floors = roundoff_floors(raw, base, again)
    scale = {k: float(base[k].abs().max()) if base[k].numel() else 0.0 for k in base}
    limit = {k: max(1e-6, 1e4 * float(torch.finfo(raw[k].dtype).eps)) for k in base if raw[k].is_floating_point()}
    moving = {k for k in noise if noise[k] > limit.get(k, 1e-6) * max(scale[k], 1e-30)}
    base = {k: v for k, v in base.items() if k not in moving}  # e.g. the positions: not translation invariant
    if not base:
        return {
            **result,
            "note": f"two runs of the wrapper, the second on the sample translated by {steps[0]:g} Å, differ by far "
            "more than round-off in every per-atom quantity (the model is not deterministic, or not translation "
            "invariant), so what a displaced atom moves cannot be told",
        }
    declared = int(wrapper_attr(wrapper, "num_interactions") or 1)
    n = batch.num_atoms
    cutoff_graph = CutoffGraph(batch, cutoff, steps)
    graph = adjacency(cutoff_graph.edges, n)
    slices = batch.system_slices()
    seen: dict[str, list[Observation]] = {}
    unbounded: set[str] = set()
    skips: dict[str, int] = {}  # quantity -> farthest hop of an atom that moved past an empty level
    used = 0
    runs: list[tuple[list[int], dict[str, np.ndarray], dict[int, np.ndarray]]] = []
    first: tuple[list[int], float] | None = None  # the first round's probes and step
    for candidates in probe_candidates(batch, PROBE_ROUNDS, PROBE_CANDIDATES):
        asked = sorted(memo.lists)  # the cutoffs the wrapper built neighbour lists for
        reuse = bool(asked) and asked[-1] <= cutoff
        chosen = choose_probes(cutoff_graph, candidates, steps, asked if reuse else ())
        if chosen is None:
            continue
        atoms, step = chosen
        first = first or (atoms, step)
        moved = _displaced(batch, atoms, step)
        if reuse:
            moved.neighbor_list = memo  # type: ignore[method-assign]
        out = _run(wrapper, moved)
        used += len(atoms)
        changes = {
            key: (out[key].to(torch.float64) - before).abs().amax(dim=1).numpy()
            for key, before in base.items()
            if key in out and out[key].shape == before.shape
        }
        runs.append((atoms, changes, {k: hop_distances(graph, k) for k in atoms}))
    spreads = spreads_roundoff(runs, slices)
    measured_floors = floors  # what other runs than these probes' are judged against (the isolated test)
    if not spreads:
        floors = dict.fromkeys(floors, 0.0)  # nothing spreads round-off: every change is a displacement's own
    for atoms, changes, hop_maps in runs:
        distances: dict[int, np.ndarray] = {}
        for key, change in changes.items():
            for k in atoms:
                sl = next(s for s in slices if s.start <= k < s.stop)
                rows = np.flatnonzero(change[sl] > MOVED_RATIO * floors[key]) + sl.start
                if rows.size == 0:
                    continue
                hops = hop_maps[k][rows]
                if rows.size == sl.stop - sl.start or (hops < 0).any():
                    unbounded.add(key)  # every atom moved: a per-system quantity feeds back, nothing is bounded
                    continue
                reach = gapless_reach(hops)
                if reach < int(hops.max()):
                    skips[key] = max(skips.get(key, 0), int(hops.max()))
                if k not in distances:
                    distances[k] = distances_from(batch, k)
                seen.setdefault(key, []).append(Observation(k, rows[hops <= reach], hop_maps[k], distances[k], reach))
    result["probes"] = used
    result["seconds"] = time.perf_counter() - t0
    if used == 0:
        return {**result, "note": "every displacement tried changed the neighbour graph; nothing was measured"}
    if not seen:
        if unbounded:
            return {
                **result,
                "status": "unbounded",
                "note": "displacing one atom moved every atom of its system (a per-system quantity feeds back into "
                "each atom), so no depth can be read off",
            }
        return {**result, "note": "displacing an atom moved no per-atom quantity above its noise floor"}
    weighed = {k: weigh(obs, cutoff, declared, _label(k, derived)[1]) for k, obs in seen.items()}
    key = max(weighed, key=lambda k: (weighed[k].depth, k.startswith("source")))
    label, _ = _label(key, derived)
    deeper = {k: w for k, w in weighed.items() if w.depth > declared}
    over = list(deeper.values())
    # the isolated test runs the wrapper twice more on another sample: that these probes' runs kept every
    # bit far away says nothing of those two (a float32 model on two CPU threads was seen to differ in
    # its last bits between them, and a zero floor then read a longer cutoff)
    thresholds = {k: MOVED_RATIO * measured_floors[k] for k in deeper}
    isolated = None
    if over and first is not None:
        isolated = read_past_cutoff(lambda b: _run(wrapper, b), _displaced, batch, *first, cutoff, deeper, thresholds)
    reach_cutoff = decide(over, cutoff, None if isolated is None else isolated.moved) if over else None
    longer = reach_cutoff is not None
    depth = declared if longer else weighed[key].depth
    result.update(
        status="measured",
        measured_depth=depth,
        basis=label,
        lower_bound=bool(unbounded),
        reach_hops=weighed[key].hops,
        reach_angstrom=round(weighed[key].angstrom, 4),
        noise_floor=floors[key],
        remedy="cutoff" if longer else ("depth" if over else "none"),
        field=None if reach_cutoff is None else round(declared * reach_cutoff, 4),
        suggested_cutoff=None if reach_cutoff is None else suggested_cutoff(reach_cutoff),
    )
    floor = (
        f"{MOVED_RATIO:g}× the noise floor (the dtype's round-off of the values, or a run on the sample translated "
        f"by {steps[0]:g} Å if larger)"
        if spreads
        else "nothing: no displacement changed a bit far from itself, so nothing spreads round-off"
    )
    said = reach_words(isolated, over, longer) if over else ""
    result["note"] = _note(used, weighed, unbounded, skips, derived, floor, said)
    return result


def _note(
    used: int,
    weighed: Mapping[str, Weighed],
    unbounded: set[str],
    skips: Mapping[str, int],
    derived: Mapping[str, bool],
    floor: str,
    decided: str,
) -> str:
    """What was measured, per quantity, for `ReceptiveField.note` (`decided`: why the reach was put down to
    the depth or the cutoff, `receptive_isolated.reach_words`)."""
    parts = [
        f"{_label(k, derived)[0]}: {w.depth} layer(s) ({w.hops} hop(s), {w.angstrom:.3g} Å)" for k, w in weighed.items()
    ]
    parts += [f"{_label(k, derived)[0]}: moved every atom" for k in sorted(unbounded)]
    note = f"{used} atom(s) displaced; moved means by more than {floor}; " + "; ".join(parts)
    if decided:
        note += f"; {decided}"
    if unbounded:
        note += f" (a lower bound: {FEEDBACK_HIDES_FIELD}, hiding the rest of the field)"
    for skipped, far in skips.items():
        note += (
            f"; {_label(skipped, derived)[0]} also moved {far} hop(s) away with nothing moving in between: "
            f"{GRAPH_SKIP} (code that reads a fixed row, such as pos[0]), not counted as depth"
        )
    return note
