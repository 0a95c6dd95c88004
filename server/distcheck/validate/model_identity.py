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
from ..runtime.launch import RankRecord
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


def _differs(ref: Sequence[float], rank: Sequence[float]) -> str | None:
    """How one tensor's `[numel, sum, sum of squares]` differs, or None when it matches."""
    n_ref, s_ref, q_ref = ref
    n_rank, s_rank, q_rank = rank
    if n_ref != n_rank:
        return f"has {int(n_ref)} elements in the reference and {int(n_rank)} on rank {{rank}}"
    q = max(abs(q_ref), abs(q_rank))
    if not _close(s_ref, s_rank, math.sqrt(n_ref * q) if n_ref else 0.0) or not _close(q_ref, q_rank, q):
        return f"differs (sum {s_ref:.6g} in the reference, {s_rank:.6g} on rank {{rank}})"
    return None


def _first_difference(ref: Mapping[str, Sequence[float]], rank: Mapping[str, Sequence[float]], r: int) -> str | None:
    extra = [k for k in rank if k not in ref]
    missing = [k for k in ref if k not in rank]
    if missing:
        return f"rank {r}'s model lacks {missing[0]!r}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
    if extra:
        return f"rank {r}'s model has {extra[0]!r}, which the reference's lacks" + (
            f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        )
    for name, value in ref.items():
        how = _differs(value, rank[name])
        if how is not None:
            changed = sum(1 for k in ref if _differs(ref[k], rank[k]) is not None)
            more = f"; {changed} of {len(ref)} tensors differ" if changed > 1 else ""
            return f"{name!r} {how.format(rank=r)}{more}"
    return None


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
