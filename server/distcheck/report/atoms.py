"""Per-atom error data of one failing (or suspicious) per-atom output, bounded in size whatever the
number of atoms: the worst atoms, a binned profile of the largest |Δ| along the cut axis, and the
partition geometry needed to draw both (each rank's owned interval and its halo bands).

Built by `distcheck.validate.diff.atom_errors`; read by the panel's charts. Never imports torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .codec import Record

__all__ = [
    "COMPONENT_NAMES",
    "DEFAULT_BINS",
    "DEFAULT_WORST",
    "AtomErrors",
    "RankInterval",
    "WorstAtom",
    "component_name",
]

DEFAULT_WORST = 16
"""How many worst atoms a record keeps."""

DEFAULT_BINS = 64
"""How many bins the profile along the cut axis has."""

COMPONENT_NAMES: tuple[str, ...] = ("x", "y", "z")
"""Names of the components of a 3-vector per-atom output (forces, velocities)."""


def component_name(component: int, n_components: int = 3) -> str:
    """`"x"`, `"y"`, `"z"` for the components of a 3-vector, else the component's number as text."""
    if n_components == 3 and 0 <= component < 3:
        return COMPONENT_NAMES[component]
    return str(component)


def describe_index(index: list[int], kind: str) -> str:
    """An output element's index in words: `"atom 279, component y"` for a per-atom output (`"atom 279"`
    when it has one value per atom), `"system 2"` for a per-system one, else `"element [1, 2]"`. The
    components 0, 1, 2 read x, y, z (per-atom outputs of more components read by number)."""
    if kind == "per_node" and len(index) == 1:
        return f"atom {index[0]}"
    if kind == "per_node" and len(index) == 2:
        return f"atom {index[0]}, component {component_name(index[1])}"
    if kind == "per_graph" and len(index) == 1:
        return f"system {index[0]}"
    return f"element {list(index)}"


@dataclass(eq=False)
class WorstAtom(Record):
    """One of the worst atoms: global `index`, the `rank` that owned it, its `position` along the cut
    axis (Å from the cut's origin), its largest `abs_diff` over components and that `component`
    (0-based; x, y, z for a 3-vector)."""

    index: int
    rank: int
    position: float
    abs_diff: float
    component: int


@dataclass(eq=False)
class RankInterval(Record):
    """One rank's slab along the cut axis: it owns `[lo, hi)` and holds as halo the atoms within
    `halo_width` of it (through the period when the cut is periodic)."""

    rank: int
    lo: float
    hi: float


@dataclass(eq=False)
class AtomErrors(Record):
    """Per-atom errors of output `output` in system `system`, bounded: `worst` holds at most
    `DEFAULT_WORST` atoms (largest |Δ| first), `profile` `len(profile)` bins of equal width over
    `[0, length]` along the cut axis `axis` (0, 1, 2: the plane normal the partition cut along), each the
    largest |Δ| of the atoms in it (0.0 for an empty bin). `ranks` are the owned slabs, `halo_width` the
    halo depth (Å; None when every rank holds every atom), `periodic` whether the cut wraps around.
    `n_atoms` atoms of the system were compared, `n_components` components per atom."""

    output: str
    system: int
    axis: int
    length: float
    periodic: bool
    halo_width: float | None
    n_atoms: int
    n_components: int
    ranks: list[RankInterval] = dataclasses.field(default_factory=list)
    worst: list[WorstAtom] = dataclasses.field(default_factory=list)
    profile: list[float] = dataclasses.field(default_factory=list)
