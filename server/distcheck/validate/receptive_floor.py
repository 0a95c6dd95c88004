"""The receptive-field measurement's noise floor (see `receptive`'s module docstring, step 1).

Each observed per-atom quantity's round-off floor is the larger of its dtype's round-off
(`sensitivity.epsilon_floor`, the floor "suspicious" is judged against) and its difference on the
rigidly translated sample (`roundoff_floors`); it applies where the model spreads round-off: where some
probe's displacement changed a bit in the far half of its system's hop levels (`spreads_roundoff`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .sensitivity import epsilon_floor

__all__ = ["FAR_LEVELS", "low_precision", "roundoff_floors", "spreads_roundoff"]

FAR_LEVELS = 4
"""A system whose atoms lie fewer hop levels from a probe than this has no far half to read round-off from."""


def low_precision(quantities: Mapping[str, torch.Tensor]) -> bool:
    """Whether some observed quantity is single precision or less."""
    return any(torch.finfo(v.dtype).eps > 1e-10 for v in quantities.values() if v.is_floating_point())


def roundoff_floors(
    raw: Mapping[str, torch.Tensor], base: Mapping[str, torch.Tensor], again: Mapping[str, torch.Tensor]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per quantity, its run-to-run difference (`again`: the translated sample) and its round-off floor:
    the larger of that and the dtype's round-off of its values (`sensitivity.epsilon_floor`, the
    definition the "suspicious" floor uses), which applies where the model spreads round-off
    (`spreads_roundoff`)."""
    noise = {k: float((base[k] - again[k]).abs().max()) if base[k].numel() else 0.0 for k in base if k in again}
    floors = {k: max(epsilon_floor(raw[k], 0.0), noise.get(k, 0.0)) for k in base}
    return noise, floors


def spreads_roundoff(
    runs: Sequence[tuple[Sequence[int], Mapping[str, np.ndarray], Mapping[int, np.ndarray]]], slices: Sequence[slice]
) -> bool:
    """Whether the model spreads round-off: some probe's displacement changed some quantity anywhere in
    the far half of its system's hop levels (positions centred on their mean, a device whose sums
    differ from run to run), or no system is large enough to have a far half to tell. When not, the
    far halves kept every bit, and no change anywhere is round-off."""
    checked = False
    for atoms, changes, hop_maps in runs:
        for k in atoms:
            sl = next(s for s in slices if s.start <= k < s.stop)
            hops = hop_maps[k][sl]
            top = int(hops.max()) if hops.size else 0
            if top < FAR_LEVELS:
                continue
            checked = True
            far = hops >= math.ceil(top / 2)
            if any(float(change[sl][far].max()) > 0.0 for change in changes.values()):
                return True
    return not checked
