"""Whether the model reads past its declared cutoff: the probes displaced again with nothing within it.

A reach deeper than declared has two explanations (`receptive_reach`): more hops of the declared
cutoff, or a cutoff longer than declared. On a dense sample the atoms each predicts to move are much
the same set, so which atoms moved cannot tell them apart. This test can: in a copy of the sample
without the atoms that lie within the declared cutoff of a probe (`isolated_sample`), a probe has no
edge in the declared cutoff's graph, so however many hops the model passes messages over that graph,
nothing carries its displacement to another atom. An atom that still moves (above its noise floor,
within the reach in Å the full sample showed) is read from farther than the declared cutoff: the
cutoff is short. When none moves, the reach is hops of the declared cutoff: the depth is short.

The test needs the probes' systems to keep some atom within the reach; it is not made (None) when
none does or the wrapper fails on the smaller sample, and `receptive_reach.decide` then weighs the
predicted sets instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..batch import Batch
from .receptive_graph import distances_from
from .receptive_reach import Weighed

__all__ = ["Isolated", "isolated_sample", "reach_words", "read_past_cutoff"]

Run = Callable[[Batch], Mapping[str, torch.Tensor]]
Displace = Callable[[Batch, Sequence[int], float], Batch]


@dataclass(frozen=True)
class Isolated:
    """What the probes moved with no atom within the declared cutoff: `moved` atoms (over the probes and
    the quantities read deeper than declared), the farthest at `farthest` Å (0 when none)."""

    moved: int
    farthest: float


def isolated_sample(batch: Batch, probes: Sequence[int], radius: float) -> tuple[Batch, list[int]]:
    """`batch` without the atoms closer than `radius` Å (nearest periodic image) to a probe of their
    system, the probes kept, and the probes' rows in it; per-atom extras are sliced too."""
    keep = np.ones(batch.num_atoms, dtype=bool)
    for probe in probes:
        keep &= ~(distances_from(batch, probe) < radius)
    keep[list(probes)] = True
    rows = np.flatnonzero(keep)
    index = torch.from_numpy(rows).to(batch.device)
    n = batch.num_atoms
    extras = {
        k: v[index] if isinstance(v, torch.Tensor) and v.ndim >= 1 and v.shape[0] == n else v
        for k, v in batch.extras.items()
    }
    smaller = Batch(
        batch.positions.detach()[index],
        batch.atomic_numbers[index],
        batch.cell,
        batch.pbc,
        batch.batch[index],
        batch.charge,
        extras,
    )
    where = {int(r): i for i, r in enumerate(rows)}
    return smaller, [where[p] for p in probes]


def read_past_cutoff(
    run: Run,
    displace: Displace,
    batch: Batch,
    probes: Sequence[int],
    step: float,
    cutoff: float,
    over: Mapping[str, Weighed],
    thresholds: Mapping[str, float],
) -> Isolated | None:
    """Displace `probes` by `step` in `isolated_sample` (radius: `cutoff` plus twice the step, so no
    edge of the declared cutoff's graph forms) and count the atoms of the quantities in `over` (read
    deeper than declared) that changed by more than their `thresholds` (never zero for a floating
    quantity: these are two runs of their own, whose round-off no earlier run vouches for), within that
    quantity's reach in Å of a probe; `run` gives a sample's per-atom quantities, `displace` moves atoms. None when the
    test cannot be made: no atom is left within the reach, or the wrapper fails on the smaller sample."""
    smaller, moved_probes = isolated_sample(batch, probes, cutoff + 2.0 * step + 1e-9)
    distance = np.min([distances_from(smaller, p) for p in moved_probes], axis=0)
    reach = max(w.angstrom for w in over.values())
    others = np.ones(smaller.num_atoms, dtype=bool)
    others[moved_probes] = False
    if not (others & (distance <= reach + 1e-9)).any():
        return None
    try:
        before = run(smaller)
        after = run(displace(smaller, moved_probes, step))
    except Exception:  # a wrapper that cannot run on fewer atoms: the test is not made
        return None
    found = np.zeros(smaller.num_atoms, dtype=bool)
    for key, weighed in over.items():
        if key not in before or key not in after or before[key].shape != after[key].shape:
            continue
        change = (after[key].to(torch.float64) - before[key].to(torch.float64)).abs().amax(dim=1).numpy()
        found |= (change > thresholds.get(key, 0.0)) & others & (distance <= weighed.angstrom + 1e-9)
    return Isolated(int(found.sum()), float(distance[found].max()) if found.any() else 0.0)


def reach_words(isolated: Isolated | None, over: Sequence[Weighed], longer: bool) -> str:
    """How the measurement's note says which declaration the reach was put down to (`longer`: the
    cutoff), from the isolated probes when the test was made, else from the atoms each predicts (empty
    for the depth then: the note's hop counts say it)."""
    if isolated is not None and longer:
        return (
            f"with every atom within the declared cutoff of a probe removed, {isolated.moved} atom(s) up to "
            f"{isolated.farthest:.3g} Å away still moved: the model reads past its declared cutoff (more hops of it "
            "would carry nothing there)"
        )
    if isolated is not None:
        return (
            "with every atom within the declared cutoff of a probe removed, no other atom moved: hops of the declared "
            "cutoff carry the reach, so the depth is short, not the cutoff"
        )
    counts = (
        f"of the atoms within each reach in Å of a probe {sum(w.wrong_cutoff for w in over)} did not move, of "
        f"those within each reach in hops {sum(w.wrong_depth for w in over)}"
    )
    return f"a longer cutoff explains the atoms that moved better than more hops: {counts}" if longer else ""
