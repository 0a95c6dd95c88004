"""Seconds of distcheck's neighbour list (`neighbors.full_neighbor_list`) on the MPNN example's samples.

    .venv/bin/python bench/neighbor_list.py [--sizes 1k,10k,100k] [--cutoff 4.0] [--repeats 3]

Per size: the median of `full_neighbor_list` as the model calls it, vesin's own `compute` alone, and
the two ways of putting vesin's pairs in a reproducible order: one sort of the `(i, j)` key
(`neighbors._pair_order`, what `full_neighbor_list` does) and the two-key `np.lexsort` (what it did
before), and vesin's own `sorted=True` (by `i` only). Also checks that both orders give the same pairs. Measures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT), str(ROOT / "bench")]


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--cutoff", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for size in args.sizes.split(","):
        print(_one(size, args.cutoff, args.repeats))


def _one(size: str, cutoff: float, repeats: int) -> str:
    import numpy as np
    import vesin
    from gpu_validate import sample

    from distcheck.neighbors import _pair_order, full_neighbor_list

    batch = sample(size)
    pos = batch.positions.detach().numpy()
    box = batch.cell[0].detach().numpy()
    periodic = list(batch.pbc[0].numpy())

    def compute(sorted_: bool) -> Any:
        nl = vesin.NeighborList(cutoff=cutoff, full_list=True, sorted=sorted_)
        return nl.compute(points=pos, box=box, periodic=periodic, quantities="ijS")

    t_full, nl = _median(lambda: full_neighbor_list(batch, cutoff), repeats)
    t_raw, raw = _median(lambda: compute(False), repeats)
    t_sorted, pre = _median(lambda: compute(True), repeats)
    i, j = np.asarray(raw[0], dtype=np.int64), np.asarray(raw[1], dtype=np.int64)
    sh = np.asarray(raw[2]).reshape(-1, 3)
    t_lex, lex = _median(lambda: np.lexsort((j, i)), repeats)
    t_key, key = _median(lambda: _pair_order(i, j, sh, len(pos)), repeats)
    same = np.array_equal(np.stack([i[lex], j[lex]]), np.stack([i[key], j[key]])) and len(pre[0]) == len(i)
    return (
        f"{size:>5} ({len(pos)} atoms, {len(i)} pairs): full_neighbor_list {t_full:.3f} s; "
        f"vesin compute {t_raw:.3f} s unsorted, {t_sorted:.3f} s sorted; "
        f"order: lexsort {t_lex:.3f} s, key sort {t_key:.3f} s; same pairs: {same}; "
        f"edges {tuple(nl.edge_index.shape)}"
    )


if __name__ == "__main__":
    main()
