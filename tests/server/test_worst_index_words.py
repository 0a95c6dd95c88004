"""A verdict's worst element reads in words ("atom 279, component y"), never as a bare index list."""

from __future__ import annotations

import pytest

from distcheck.report.atoms import describe_index
from distcheck.report.failures import output_failure
from distcheck.report.model import OutputVerdict
from distcheck.report.parts import ReportMeta


@pytest.mark.parametrize(
    ("index", "kind", "words"),
    [
        ([279, 1], "per_node", "atom 279, component y"),
        ([0, 0], "per_node", "atom 0, component x"),
        ([5, 2], "per_node", "atom 5, component z"),
        ([7], "per_node", "atom 7"),
        ([4, 7], "per_node", "atom 4, component 7"),
        ([2], "per_graph", "system 2"),
        ([1, 2], "global", "element [1, 2]"),
    ],
)
def test_describe_index(index: list[int], kind: str, words: str) -> None:
    assert describe_index(index, kind) == words


def test_the_failure_text_names_the_atom_and_component() -> None:
    v = OutputVerdict("forces", "per_node", False, 0.1, 0.2, "mismatch", [279, 1], 3, 300)
    failure = output_failure(v, ReportMeta(atol=1e-6, rtol=1e-5))
    text = failure.to_dict()
    assert "atom 279, component y" in str(text)
    assert "[279, 1]" not in str(text)
