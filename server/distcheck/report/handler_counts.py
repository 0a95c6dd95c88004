"""The names of the handler counts (`Attempt.handler_counts`, `CrashTrace.handler_counts`,
`runtime.DistributedRun.handler_counts`): what the runtime's handlers fired, name → times (summed over ranks).

`HANDLER_COUNTS` is the one statement of those names: the runtime builds every name it counts with
`handler_count` (so a name not recorded here cannot be counted), readers take a name apart with
`handler_count_kind` and sum a kind with `fired`, and the table in docs/validating.md is
`handler_counts_markdown()`, between the `BEGIN` and `END` lines (`python -m
distcheck.report.handler_counts docs/validating.md` rewrites it; tests/server/report/test_handler_counts.py
keeps them equal). A name is a `kind` alone
(`halo_read`) or `kind[target]` (`halo_refresh[index_add]`), the target saying which op, kernel or
helper fired it. Names are stable: renaming one is a breaking change of the report, made here, in the
docs and in the report's consumers at once. No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "BEGIN",
    "END",
    "HANDLER_COUNTS",
    "HandlerCount",
    "fired",
    "handler_count",
    "handler_count_kind",
    "handler_counts_markdown",
    "with_table",
]


@dataclass(frozen=True)
class HandlerCount:
    """One kind of handler count: its `kind`, what goes between the brackets (`target`, in words; None: the
    name is the kind alone), the runtime modules that count it (`counted_in`) and what it means."""

    kind: str
    target: str | None
    counted_in: tuple[str, ...]
    meaning: str

    @property
    def pattern(self) -> str:
        """The name as the docs write it: `kind` or `kind[<target>]`."""
        return self.kind if self.target is None else f"{self.kind}[<{self.target}>]"


HANDLER_COUNTS: tuple[HandlerCount, ...] = (
    HandlerCount(
        "per_system_reduce",
        None,
        ("runtime.reduce_handlers", "runtime.dispatch"),
        "A per-atom → per-system reduction (a scatter keyed by the system index, `segment_reduce`, a count, "
        "a sum or mean over a system's atoms) masked to the owned atoms and all-reduced.",
    ),
    HandlerCount(
        "per_system_broadcast",
        None,
        ("runtime.reduce_handlers",),
        "A per-system value repeated onto atoms (`repeat_interleave` by the systems' atom counts) with this "
        "rank's counts.",
    ),
    HandlerCount(
        "halo_scatter_correction",
        "scatter op",
        ("runtime.edge_handlers",),
        "A per-edge → per-atom aggregation (`halo_correction`) completed over the ranks holding each atom.",
    ),
    HandlerCount(
        "halo_refresh",
        "scatter op",
        ("runtime.edge_handlers",),
        "A per-edge → per-atom aggregation (`owned_complete`) whose halo rows were overwritten by their owners' "
        "values.",
    ),
    HandlerCount(
        "halo_read",
        None,
        ("runtime.edge_handlers",),
        "One exchange that reads the halo rows from their owners (each correction or refresh counts one).",
    ),
    HandlerCount(
        "custom_op",
        "ns::op",
        ("runtime.dispatch",),
        "A `torch.ops` kernel declared in `custom_ops` ran with its argument and output transforms.",
    ),
    HandlerCount(
        "adapter",
        "module.function",
        ("runtime.adapters",),
        "A helper declared in `third_party_helpers` ran through its adapter (reduction, method or replacement).",
    ),
    HandlerCount(
        "replicated_seed",
        None,
        ("runtime.dispatch",),
        "An autograd seed of a replicated output divided by the world size (each rank's backward adds its share).",
    ),
    HandlerCount(
        "unintercepted",
        "op or kernel",
        ("runtime.dispatch", "runtime.observer"),
        "An aggregation ran that no handler routed (also listed in the attempt's `unrouted`): its result is "
        "this rank's partial.",
    ),
)

_BY_KIND = {h.kind: h for h in HANDLER_COUNTS}


def handler_count(kind: str, target: str | None = None) -> str:
    """The handler-count name of `kind` (one of `HANDLER_COUNTS`) for `target`: `kind` or `kind[target]`.
    `ValueError` for a kind not recorded, or a target given to a kind without one (or missing)."""
    found = _BY_KIND.get(kind)
    if found is None:
        raise ValueError(f"{kind!r} is not a handler count; record it in distcheck.report.handler_counts first")
    if (target is None) != (found.target is None):
        want = "no target" if found.target is None else f"a target ({found.target})"
        raise ValueError(f"handler count {kind!r} takes {want}; got {target!r}")
    return kind if target is None else f"{kind}[{target}]"


def handler_count_kind(name: str) -> HandlerCount | None:
    """The record of the handler-count name `name` (`halo_refresh[index_add]` → `halo_refresh`), None when
    `name` is none of `HANDLER_COUNTS` (an older report's, or no handler count)."""
    kind, bracket, rest = name.partition("[")
    found = _BY_KIND.get(kind)
    if found is None or bool(bracket) != (found.target is not None) or (bracket and not rest.endswith("]")):
        return None
    return found


def fired(counts: Mapping[str, int], kind: str) -> int:
    """How often the handlers of `kind` (one of `HANDLER_COUNTS`) fired in `counts`, every target summed;
    `ValueError` for a kind not recorded (a reader of a renamed kind fails at once, not silently at 0)."""
    if kind not in _BY_KIND:
        raise ValueError(f"{kind!r} is not a handler count; the kinds are {', '.join(_BY_KIND)}")
    return sum(int(n) for name, n in counts.items() if (found := handler_count_kind(name)) and found.kind == kind)


def handler_counts_markdown() -> str:
    """The table of the handler-count names docs/validating.md shows (one row per `HANDLER_COUNTS` entry)."""
    rows = ["| name | counted in | meaning |", "| --- | --- | --- |"]
    for h in HANDLER_COUNTS:
        where = ", ".join(f"`{m}`" for m in h.counted_in)
        rows.append(f"| `{h.pattern}` | {where} | {h.meaning} |")
    return "\n".join(rows) + "\n"


BEGIN = (
    "<!-- handler-counts: generated from distcheck.report.handler_counts "
    "(python -m distcheck.report.handler_counts docs/validating.md); edit the record, not this table -->"
)
END = "<!-- /handler-counts -->"


def with_table(text: str) -> str:
    """`text` (a Markdown page holding the `BEGIN` … `END` block) with the block's table regenerated;
    `ValueError` when the page has no such block."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the page has no {BEGIN!r} … {END!r} block; add one where the table goes")
    return f"{head}{BEGIN}\n\n{handler_counts_markdown()}\n{END}{tail}"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    for page in sys.argv[1:]:
        path = Path(page)
        path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
