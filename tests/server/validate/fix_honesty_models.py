"""Models for `test_fix_honesty_e2e.py`: `examples.self_graph`'s two shapes that break `owned_complete`
(a dense aggregation; a degree counted outside the scatters), with three layers but declaring one, so
the switch to `local` must take its halo from the measured depth, not the declared one."""

from __future__ import annotations

from examples import self_graph


def dense_declared_one() -> self_graph.SelfGraphMPNN:
    """Three layers summed over a dense adjacency; declares `num_interactions = 1`."""
    model = self_graph.dense_factory()
    model.num_interactions = 1
    return model


def degree_declared_one() -> self_graph.SelfGraphMPNN:
    """Three layers normalised by a dense-matrix degree; declares `num_interactions = 1`."""
    model = self_graph.degree_factory()
    model.num_interactions = 1
    return model
