"""Did the reference and every rank build the same model?

Each process calls the factory itself (`runtime.model_build.build_wrapper`, generators seeded alike),
and each reports `weights_fingerprint` of what it built. When an attempt fails and a rank's model
differs from the reference's, its outputs differ for a reason no spec can fix: the attempt is errored
with `FactoryNotReproducible` (no auto-fix follows), pointing at the factory, instead of blaming the
distribution. A difference that leaves every output within tolerance (an unused buffer) fails
nothing. Wrappers that are not `nn.Module`s have no fingerprint and are not checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..report import Frame, WorkerError
from ..runtime.run_result import RankRecord
from .outputs import OUTPUT_PHASE

__all__ = ["FACTORY_NOT_REPRODUCIBLE", "factory_mismatch"]

FACTORY_NOT_REPRODUCIBLE = "FactoryNotReproducible"
"""`WorkerError.type` of an attempt whose ranks built another model than the reference."""

_RTOL = 1e-9  # float64 sums of identical tensors on different devices agree far closer than this

_ADVICE = (
    "make model_factory() build the same model in every process: load the trained weights in it "
    "(model.load_state_dict(torch.load(path))) or seed whatever varies; distcheck seeds torch, numpy and "
    "random alike before every call, so the difference comes from elsewhere (torch.seed(), the clock, "
    "os.urandom, or a file or environment variable that differs between processes)"
)


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= _RTOL * scale or (math.isnan(a) and math.isnan(b))


def _same(ref: Sequence[float], rank: Sequence[float]) -> bool:
    """Whether two tensors' `[numel, sum, sum of squares]` agree (to far below any real difference)."""
    n_ref, s_ref, q_ref = ref
    n_rank, s_rank, q_rank = rank
    q = max(abs(q_ref), abs(q_rank))
    return n_ref == n_rank and _close(s_ref, s_rank, math.sqrt(n_ref * q)) and _close(q_ref, q_rank, q)


def _more(names: Sequence[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def _first_difference(ref: Mapping[str, Sequence[float]], rank: Mapping[str, Sequence[float]], r: int) -> str | None:
    """How rank `r`'s model differs from the reference's, in words (its first differing tensor), or None."""
    missing = [k for k in ref if k not in rank]
    if missing:
        return f"its model lacks {missing[0]!r}{_more(missing)}"
    extra = [k for k in rank if k not in ref]
    if extra:
        return f"its model has {extra[0]!r}, which the reference's lacks{_more(extra)}"
    changed = [k for k in ref if not _same(ref[k], rank[k])]
    if not changed:
        return None
    name = changed[0]
    (n_ref, s_ref, _), (n_rank, s_rank, _) = ref[name], rank[name]
    if n_ref != n_rank:
        return f"{name!r} has {int(n_ref)} elements in the reference and {int(n_rank)} on rank {r}{_more(changed)}"
    return f"{name!r} sums to {s_ref:.6g} in the reference and {s_rank:.6g} on rank {r}{_more(changed)}"


def factory_mismatch(reference: Mapping[str, Any], records: Sequence[RankRecord]) -> WorkerError | None:
    """The attempt's error when some rank built another model than the reference (the first such
    rank, its first differing tensor), else None (also when either side has no fingerprint)."""
    ref = reference.get("weights")
    if ref is None:
        return None
    for record in records:
        if record.weights is None:
            continue
        what = _first_difference(ref, record.weights, record.rank)
        if what is None:
            continue
        frame_data = reference.get("factory_frame")
        frame = Frame(**frame_data) if frame_data else None
        text = f"model_factory() built a different model on rank {record.rank} than in the reference ({what}): "
        text += _ADVICE
        return WorkerError(
            type=FACTORY_NOT_REPRODUCIBLE,
            message=text,
            rank=record.rank,
            phase=OUTPUT_PHASE,
            frames=[frame] if frame is not None else [],
            user_frame=frame,
            hint=text,
        )
    return None
