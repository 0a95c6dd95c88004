"""The handler-count names (issue 32, item 7): one record (`distcheck.report.handler_counts`) states
them, the runtime builds every name it counts from it, and docs/validating.md shows its table.

A name changed in the runtime without the record fails here (the runtime source is read: every
`ctx.count(...)` takes a `handler_count(kind, ...)` name of a recorded kind, with a target exactly when
the kind has one, and every recorded kind is counted where the record says); a record changed
without the docs fails here too; and the names a real run counts all parse back to their record.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from distcheck.report import handler_counts as hc
from distcheck.report.handler_counts import (
    HANDLER_COUNTS,
    fired,
    handler_count,
    handler_count_kind,
    with_table,
)

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "server" / "distcheck"
DOC = ROOT / "docs" / "validating.md"


def test_the_docs_table_is_the_records() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert hc.BEGIN in text and hc.END in text
    assert with_table(text) == text, (
        "docs/validating.md's handler-count table is generated: run "
        "`python -m distcheck.report.handler_counts docs/validating.md` (from the repository root)"
    )
    for h in HANDLER_COUNTS:
        assert f"| `{h.pattern}` |" in text


def test_names_build_and_parse_back() -> None:
    kinds = [h.kind for h in HANDLER_COUNTS]
    assert len(set(kinds)) == len(kinds)
    for h in HANDLER_COUNTS:
        assert h.meaning.endswith(".") and h.counted_in and all(m.startswith("runtime.") for m in h.counted_in)
        name = handler_count(h.kind) if h.target is None else handler_count(h.kind, "aten.index_add")
        assert handler_count_kind(name) is h
        with pytest.raises(ValueError, match=h.kind):
            handler_count(h.kind, "x") if h.target is None else handler_count(h.kind)
    for name in ("halo_fix", "halo_read[x]", "halo_refresh", "halo_refresh[x", "", "[x]", "adapter[]x"):
        assert handler_count_kind(name) is None, name
    with pytest.raises(ValueError, match="not a handler count"):
        handler_count("halo_fix")


OWN_NAMES = ("handler_counts.py", "reference.py")
"""The record itself, and `validate.reference`, whose single-process trace counts ops under names of its
own (`per_system_reduce[scatter_add]`, `edge_aggregation[...]`: `reference["counts"]`, never a report's
handler counts)."""


def test_fired_sums_a_kind_and_refuses_an_unknown_one() -> None:
    counts = {"halo_refresh[index_add]": 2, "halo_refresh[scatter_add]": 3, "halo_read": 5, "older_name[x]": 7}
    assert fired(counts, "halo_refresh") == 5 and fired(counts, "halo_read") == 5 and fired(counts, "adapter") == 0
    with pytest.raises(ValueError, match="not a handler count"):
        fired(counts, "older_name")


def test_readers_sum_recorded_kinds() -> None:
    """Every `fired(counts, "kind")` in the package names a recorded kind, and no module outside the
    runtime reads a handler count by a name prefix of its own."""
    kinds = {h.kind for h in HANDLER_COUNTS}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "fired":
                kind = node.args[1]
                assert isinstance(kind, ast.Constant) and kind.value in kinds, f"{path}:{node.lineno}"
            if path.name not in OWN_NAMES and isinstance(node, ast.Constant) and isinstance(node.value, str):
                bracketed = node.value.endswith("[") and node.value[:-1] in kinds
                assert not bracketed, f"{path}:{node.lineno}: read it with handler_counts.fired"


def _count_calls(tree: ast.AST) -> list[ast.Call]:
    """Every `<...>ctx.count(...)` call of a module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "count":
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "ctx":
                out.append(node)
    return out


def _built_names(tree: ast.AST) -> dict[str, list[ast.Call]]:
    """Variables assigned a `handler_count(...)` call, with those calls."""
    out: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_builder(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
    return out


def _is_builder(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "handler_count"


def test_the_runtime_counts_only_recorded_names() -> None:
    counted: dict[str, set[str]] = {}
    modules = sorted((PACKAGE / "runtime").rglob("*.py"))
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = "runtime." + ".".join(path.relative_to(PACKAGE / "runtime").with_suffix("").parts)
        built = _built_names(tree)
        for call in _count_calls(tree):
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            assert call.args, where
            arg = call.args[0]
            if isinstance(arg, ast.Name) and arg.id in built:
                builders = built[arg.id]
            elif isinstance(arg, ast.Call) and _is_builder(arg):
                builders = [arg]
            elif isinstance(arg, ast.Name) and arg.id == "handler" and path.name == "context.py":
                continue  # RankContext.count itself
            else:
                raise AssertionError(f"{where}: counts a name not built with report.handler_counts.handler_count")
            for builder in builders:
                kind = builder.args[0]
                assert isinstance(kind, ast.Constant) and isinstance(kind.value, str), where
                record = next((h for h in HANDLER_COUNTS if h.kind == kind.value), None)
                assert record is not None, f"{where}: {kind.value!r} is not in HANDLER_COUNTS"
                assert (len(builder.args) > 1) == (record.target is not None), f"{where}: {kind.value} target"
                counted.setdefault(record.kind, set()).add(module)
    for h in HANDLER_COUNTS:
        assert counted.get(h.kind) == set(h.counted_in), f"{h.kind}: counted in {sorted(counted.get(h.kind, ()))}"


@pytest.mark.procs
def test_a_run_counts_recorded_names() -> None:
    from distcheck import MLIPSpec, run_distributed
    from examples import mpnn

    batch = mpnn.sample_batch()
    run = run_distributed(
        mpnn.model_factory, batch, MLIPSpec.coerce(mpnn.model_factory().distribution_spec), world_size=2
    )
    assert run.handler_counts
    for name in run.handler_counts:
        assert handler_count_kind(name) is not None, f"{name} is not a recorded handler count"
