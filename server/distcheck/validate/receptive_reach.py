"""Which declaration explains a measured reach: the depth (hops of the declared cutoff) or the cutoff.

A displaced probe moves a set of atoms (above the noise floor, `receptive`). Two hypotheses can
explain a set wider than the declared field, each predicting a set of its own:

- **depth**: the model passes messages over the declared cutoff's graph, more times than declared;
  it predicts that the atoms within `H` hops of the probe move, `H` the reach in hops (the depth read
  off is `ceil(H / per_layer)`);
- **cutoff**: the model reads atoms farther than the declared cutoff, as deep as declared; the set
  within `D × per_layer` hops of a longer cutoff's graph is, in a dense sample, the ball of the reach
  in Å, `ρ` (the farthest moved atom, nearest periodic image), so it predicts that the atoms within
  `ρ` of the probe move. A graph's ball of `k` hops grows in proportion to its cutoff, so the cutoff
  it implies is `declared cutoff × ρ / ρ_k`, `ρ_k` how far the declared graph's `D × per_layer` hops
  reach from the same probes.

Every moved atom is in both predicted sets, and on a dense sample the two sets are much the same: a
depth model's far hops are weak (its edges near the cutoff carry little), so the atoms its hops
predict at the rim do not move, and it looks like a sharp ball of the reach in Å. So `decide` asks
the test that tells them apart when it could be made (`receptive_isolated`: the probes displaced
again with every atom within the declared cutoff removed, where hops carry nothing): the cutoff is
named when some atom still moved there (and the cutoff it implies is longer than the declared one),
the depth when none did. Only when that test could not be made does it weigh the atoms each predicts
that did not move (`Weighed.wrong_depth`, `wrong_cutoff`, summed over the probes and over the
quantities read deeper than declared): the cutoff is named only when it is clearly the better
explanation (`CUTOFF_MARGIN`) and enough atoms moved past the declared hops (`MIN_BEYOND`).
Otherwise a depth is advised: a reach that hops of the declared cutoff carry is read as deeper,
never as a cutoff.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CUTOFF_MARGIN", "MIN_BEYOND", "Observation", "Weighed", "decide", "suggested_cutoff", "weigh"]

CUTOFF_MARGIN = 0.6
"""Without the isolated probes' test: the cutoff explains better when it predicts at most this
fraction of the atoms the depth predicts wrongly (and fewer)."""

MIN_BEYOND = 4
"""The cutoff is named only on at least this many moved atoms past the declared hops (over all
probes): a few atoms just past them are what a weak last hop leaves, and tell nothing apart."""

CUTOFF_GRID = 0.5
"""A suggested cutoff is rounded up to a multiple of this (Å): atoms at the model's own cutoff move
too little to be seen, so the farthest one seen is short of it."""


@dataclass
class Observation:
    """What one quantity did around one probe: the rows that `moved` (the probe's system, within the
    gapless hop reach), and for every atom its `hops` from the probe in the declared cutoff's graph
    (-1: unreachable) and its `distance` (Å; `inf` outside the probe's system)."""

    probe: int
    moved: np.ndarray
    hops: np.ndarray
    distance: np.ndarray
    reach: int


@dataclass
class Weighed:
    """One quantity's reach (`hops`, `angstrom`), the depth that hops give (`depth`, at least 1), the
    cutoff a ball of `angstrom` implies at the declared depth (`cutoff`), the atoms each hypothesis
    predicted that did not move, and how many moved atoms lie past the declared hops (`beyond`)."""

    hops: int
    angstrom: float
    depth: int
    cutoff: float
    wrong_depth: int
    wrong_cutoff: int
    beyond: int


def _ball(o: Observation, hops: int) -> float:
    """How far (Å) the atoms within `hops` hops of the probe reach."""
    inside = (o.hops >= 0) & (o.hops <= hops)
    return float(o.distance[inside].max())


def weigh(observations: Sequence[Observation], declared_cutoff: float, declared_depth: int, per_layer: int) -> Weighed:
    """Weigh the depth and the cutoff hypotheses (see the module docstring) on one quantity's
    `observations` (at least one)."""
    hops = max(o.reach for o in observations)
    angstrom = max(float(o.distance[o.moved].max()) if o.moved.size else 0.0 for o in observations)
    wrong_depth = wrong_cutoff = beyond = 0
    declared_hops = max(declared_depth, 1) * per_layer
    ball = max(_ball(o, declared_hops) for o in observations)
    for o in observations:
        moved = np.zeros(o.hops.shape, dtype=bool)
        moved[o.moved] = True
        moved[o.probe] = True
        by_hops = (o.hops >= 0) & (o.hops <= hops)
        by_distance = o.distance <= angstrom
        wrong_depth += int((by_hops & ~moved).sum())
        wrong_cutoff += int((by_distance & ~moved).sum())
        beyond += int((o.hops[o.moved] > declared_hops).sum())
    cutoff = declared_cutoff * angstrom / ball if ball > 0 else 0.0
    return Weighed(hops, angstrom, math.ceil(hops / per_layer), cutoff, wrong_depth, wrong_cutoff, beyond)


def decide(over: Sequence[Weighed], declared_cutoff: float, isolated_moved: int | None = None) -> float | None:
    """The cutoff (Å, unrounded) that explains the quantities read deeper than declared (`over`, at least
    one) rather than more hops (see the module docstring); None: the depth does. `isolated_moved` is
    how many atoms moved with every atom within the declared cutoff of a probe removed
    (`receptive_isolated`; None: that test was not made, the predicted sets are weighed instead)."""
    longest = max(w.cutoff for w in over)
    if longest <= declared_cutoff * (1.0 + 1e-9):
        return None
    if isolated_moved is not None:
        return longest if isolated_moved > 0 else None
    wrong_depth = sum(w.wrong_depth for w in over)
    wrong_cutoff = sum(w.wrong_cutoff for w in over)
    if sum(w.beyond for w in over) < MIN_BEYOND:
        return None
    return longest if wrong_cutoff < CUTOFF_MARGIN * wrong_depth else None


def suggested_cutoff(cutoff: float) -> float:
    """`cutoff` rounded up to the next multiple of `CUTOFF_GRID` (Å)."""
    return math.ceil(cutoff / CUTOFF_GRID - 1e-9) * CUTOFF_GRID
