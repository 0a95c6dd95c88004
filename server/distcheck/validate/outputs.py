"""What the validator requires of the wrapper's outputs before it compares them, and the report entry
for each way they fall short.

Valid outputs: a mapping of name to a **floating-point or complex** tensor (any precision). Integer and
bool tensors are refused: the comparison is within atol/rtol, an integer output is nearly always a
truncated accumulator (`torch.zeros(n, dtype=torch.long).index_add(...)`), and labels, counts or masks
are not quantities whose distribution needs checking. The single-process reference must return at
least one output and only finite values (NaN or inf there is a problem of the model or the sample,
found before any rank starts: no attempt is made). Each rank must return the reference's outputs, no
more and no fewer, with the reference's dtype class and shape — per-node outputs with one row per
local atom and the reference's trailing shape, per-graph and global outputs with the reference's shape.

Every shortfall is an `OutputProblem` (the output, the rank or None for the single process, a problem
code, a message naming the output and what to change); `output_error` turns them into the attempt's
`WorkerError` (type `WrapperError`, phase `outputs`), `nonfinite_reference_error` into one of type
`NonFiniteReference`. The report's `meta.output_problems` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..report import Frame, WorkerError
from ..report.parts import OutputProblem, ReportMeta
from ..runtime import pristine as P
from ..runtime.consolidate import RankRows
from ..runtime.frames import innermost_user_frame
from ..runtime.model import WrapperError
from ..spec import MLIPSpec

__all__ = [
    "OUTPUT_PHASE",
    "PROBLEM_CODES",
    "OutputProblem",
    "kind_problems",
    "nonfinite_counts",
    "nonfinite_reference_error",
    "output_error",
    "problem_from_error",
    "rank_problems",
    "reference_error",
    "reference_problems",
]

OUTPUT_PHASE = "outputs"
"""`WorkerError.phase` of an error found in the wrapper's outputs (not raised by the wrapper)."""

PROBLEM_CODES: tuple[str, ...] = ("empty", "dtype", "kind", "missing", "extra", "shape", "consolidate")
"""`OutputProblem.problem` values."""

_SAME_OUTPUTS = (
    "the wrapper must return the same outputs in one process and on every rank (an output must not depend on "
    "the batch being a rank's LocalBatch or on current_context())"
)
_MAX_LISTED = 8


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _comparable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _dtype_message(name: str, t: torch.Tensor, where: str) -> str:
    return (
        f"output {name!r} is {_dtype(t)} {where}: distcheck compares outputs within atol/rtol, so they must be "
        "floating point (or complex); compute it in floating point (an integer output is usually a truncating "
        f"accumulator such as torch.zeros(n, dtype=torch.long)), or leave integer and bool outputs (labels, counts, "
        "masks) out of the returned mapping"
    )


def reference_problems(outputs: Mapping[str, torch.Tensor], wrapper_class: str) -> list[OutputProblem]:
    """Problems of the single-process outputs themselves: none at all, or a non-floating dtype."""
    if not outputs:
        return [
            OutputProblem(
                None,
                None,
                "empty",
                f"{wrapper_class}.forward returned an empty mapping, so there is nothing to compare; return the "
                'outputs to validate, e.g. {"energy": e, "forces": f}',
            )
        ]
    return [
        OutputProblem(name, None, "dtype", _dtype_message(name, t, "in the single-process run"))
        for name, t in outputs.items()
        if not _comparable(t)
    ]


def nonfinite_counts(outputs: Mapping[str, torch.Tensor]) -> dict[str, dict[str, int]]:
    """`{name: {"nan", "inf", "elements"}}` for every output holding NaN or ±inf (floating or complex)."""
    found: dict[str, dict[str, int]] = {}
    for name, value in outputs.items():
        if not _comparable(value):
            continue
        with P.shielded():  # the user's replaced torch functions never count them
            v = P.detach(value)
            nan = P.int_of(P.sum(P.isnan(v)))
            inf = P.int_of(P.sum(P.isinf(v)))
        if nan or inf:
            found[name] = {"nan": nan, "inf": inf, "elements": int(P.numel(v))}
    return found


def _count_text(counts: Mapping[str, int]) -> str:
    parts = [f"{counts[k]} {label}" for k, label in (("nan", "NaN"), ("inf", "inf")) if counts.get(k)]
    return " and ".join(parts) + f" of {counts.get('elements', 0)} values"


def nonfinite_reference_error(counts: Mapping[str, Mapping[str, int]], wrapper: Mapping[str, Any]) -> WorkerError:
    """The reference run's error when its outputs hold NaN/inf: the model or the sample is at fault."""
    listed = "; ".join(f"{name!r}: {_count_text(c)}" for name, c in counts.items())
    names = ", ".join(repr(n) for n in counts)
    return WorkerError(
        type="NonFiniteReference",
        message=f"the single-process reference run returned non-finite values ({listed})",
        rank=None,
        phase="reference",
        frames=_wrapper_frames(wrapper),
        user_frame=innermost_user_frame(_wrapper_frames(wrapper)),
        hint=(
            f"the model gives NaN/inf in {names} in one process, before anything is distributed, so this is a "
            "problem of the model or the sample, not of distribution: fix it in one process first (call "
            "model_factory()(sample) and look for atoms at the same position or closer than the model allows, a "
            "division by a zero distance or count, a log/sqrt of zero; torch.autograd.set_detect_anomaly(True) "
            "names the op that made the first NaN), then validate again"
        ),
    )


def kind_problems(
    outputs: Mapping[str, torch.Tensor], spec: MLIPSpec, num_atoms: int, num_systems: int
) -> list[OutputProblem]:
    """Outputs whose kind in `spec.output_kinds` contradicts their single-process shape: a per-node
    output needs one row per atom, a per-graph output one row per system."""
    problems: list[OutputProblem] = []
    for name, value in outputs.items():
        kind = spec.output_kinds.get(name)
        rows = None if value.ndim == 0 else int(value.shape[0])
        need = {"per_node": (num_atoms, "atom"), "per_graph": (num_systems, "system")}.get(kind or "")
        if need is None or rows == need[0]:
            continue
        got = "a scalar" if rows is None else f"shape {list(value.shape)}"
        fitting = [k for k, n in (("per_node", num_atoms), ("per_graph", num_systems)) if rows == n] or ["global"]
        problems.append(
            OutputProblem(
                name,
                None,
                "kind",
                f"output_kinds.{name} is {kind} in the spec, which needs one row per {need[1]} ({need[0]}), but the "
                f"single-process run returned {got} for {num_atoms} atoms in {num_systems} system(s); set "
                f"output_kinds.{name} to {fitting[0]} in the spec (or the wrapper's output_kinds), or return "
                f"one row per {need[1]}",
            )
        )
    return problems


def rank_problems(
    rank_outputs: Sequence[Mapping[str, torch.Tensor]],
    rows: Sequence[RankRows],
    reference: Mapping[str, torch.Tensor],
    kinds: Mapping[str, str],
) -> list[OutputProblem]:
    """Where the ranks' outputs do not fit the reference's: missing or extra outputs, a non-floating
    dtype, a shape that differs (per-node: one row per local atom, the reference's trailing shape)."""
    problems: list[OutputProblem] = []
    for r, (outputs, rr) in enumerate(zip(rank_outputs, rows)):
        for name in reference:
            if name not in outputs:
                problems.append(
                    OutputProblem(
                        name,
                        r,
                        "missing",
                        f"rank {r} returned no output {name!r}, which the single-process run returned; {_SAME_OUTPUTS}",
                    )
                )
        for name, value in outputs.items():
            ref = reference.get(name)
            if ref is None:
                problems.append(
                    OutputProblem(
                        name,
                        r,
                        "extra",
                        f"rank {r} returned output {name!r}, which the single-process run did not; {_SAME_OUTPUTS}",
                    )
                )
                continue
            if not _comparable(value):
                problems.append(OutputProblem(name, r, "dtype", _dtype_message(name, value, f"on rank {r}")))
                continue
            kind = kinds.get(name, "global")
            n_local = int(rr.local_ids.shape[0])
            expected = [n_local, *ref.shape[1:]] if kind == "per_node" else list(ref.shape)
            if list(value.shape) != expected:
                problems.append(OutputProblem(name, r, "shape", _shape_message(name, r, value, ref, kind, n_local)))
    return problems


def _shape_message(name: str, rank: int, value: torch.Tensor, ref: torch.Tensor, kind: str, n_local: int) -> str:
    got, single = list(value.shape), list(ref.shape)
    if kind == "per_node":
        return (
            f"output {name!r} (per_node) has shape {got} on rank {rank}, but {[n_local, *single[1:]]} is needed: one "
            f"row per atom of the rank's batch ({n_local}) with the single-process trailing shape {single[1:]}; "
            "return the same per-atom shape whatever the batch"
        )
    return (
        f"output {name!r} ({kind}) has shape {got} on rank {rank} but {single} in the single-process run; a "
        f"{kind} output must have the same shape on every rank as in one process (sizes from batch.num_systems, "
        f"not from the atoms a rank holds), or set output_kinds.{name} to per_node if it has one row per atom"
    )


def problem_from_error(err: WrapperError) -> OutputProblem:
    """The problem consolidation found (a `WrapperError` raised while combining the ranks' outputs)."""
    return OutputProblem(err.output, err.rank, "consolidate", str(err))


def _wrapper_frames(wrapper: Mapping[str, Any]) -> list[Frame]:
    file, line = wrapper.get("file"), wrapper.get("line")
    if not isinstance(file, str) or not isinstance(line, int):
        return []
    return [Frame(file=file, line=line, function=str(wrapper.get("class") or "").rpartition(".")[2])]


def output_error(problems: Sequence[OutputProblem], wrapper: Mapping[str, Any]) -> WorkerError:
    """The attempt's error for output problems: the first one as the hint, all of them (up to
    `_MAX_LISTED`) in the message; the frame is the wrapper's class."""
    first = problems[0]
    listed = [p.message or "" for p in problems[:_MAX_LISTED]]
    if len(problems) > _MAX_LISTED:
        listed.append(f"and {len(problems) - _MAX_LISTED} more (meta.output_problems)")
    return WorkerError(
        type="WrapperError",
        message="; ".join(listed) if len(problems) > 1 else listed[0],
        rank=first.rank,
        phase=OUTPUT_PHASE,
        frames=_wrapper_frames(wrapper),
        user_frame=innermost_user_frame(_wrapper_frames(wrapper)),
        hint=listed[0],
    )


def reference_error(
    reference: Mapping[str, Any], spec: MLIPSpec, num_atoms: int, num_systems: int, meta: ReportMeta
) -> WorkerError | None:
    """Why the single-process outputs cannot be validated (None when they can), checked in this order:
    no outputs or a non-floating dtype, then NaN/inf (`meta.reference_nonfinite`: counts per output),
    then output kinds the spec gives that contradict the shapes. Problems go to `meta.output_problems`."""
    outputs: Mapping[str, torch.Tensor] = reference["outputs"]
    info: Mapping[str, Any] = reference.get("wrapper") or {}
    problems = reference_problems(outputs, str(info.get("class") or "the wrapper").rpartition(".")[2])
    if not problems:
        counts = nonfinite_counts(outputs)
        if counts:
            meta.reference_nonfinite = counts
            return nonfinite_reference_error(counts, info)
        problems = kind_problems(outputs, spec, num_atoms, num_systems)
    if not problems:
        return None
    meta.output_problems = list(problems)
    return output_error(problems, info)
