"""A tiny energy/forces model whose outputs go wrong in one named way, for the junk-output tests.

`JunkOutputs(junk)` returns `energy [B]` (per system) and `forces [N, 3]` (autograd) and then spoils
them as `junk` says. Junk with an `_ranks` suffix is applied only inside a rank (the single-process
reference is clean), so the problem is found on the distributed side; the rest is applied everywhere
and is found in the reference. Each `factory_<junk>` is a module-level factory the ranks can import.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from distcheck.runtime import current_context
from examples.structures import make_batch, periodic_slab_system


def _rank() -> int:
    ctx = current_context()
    return -1 if ctx is None else ctx.rank


class JunkOutputs(nn.Module):
    """`energy = sum_i |r_i|^2 / 100 + 1/2 sum_ij pair(r_ij)` per system, `forces = -dE/dr`, then the junk."""

    cutoff = 3.0
    num_interactions = 1

    def __init__(self, junk: str) -> None:
        super().__init__()
        self.junk = junk

    def forward(self, batch: Batch) -> Any:
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        pair = torch.exp(-r) * (1.0 + torch.cos(torch.pi * r / self.cutoff))
        e_atom = (pos**2).sum(dim=1) / 100.0
        e_atom = e_atom + 0.5 * torch.zeros_like(e_atom).index_add(0, nl.edge_index[0], pair)
        energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        out: dict[str, Any] = {"energy": energy.detach(), "forces": forces}
        junk, rank = self.junk, _rank()
        if junk.endswith("_ranks"):
            if rank < 0:
                return out
            junk = junk[: -len("_ranks")]
        elif junk.endswith("_rank1"):
            if rank != 1:
                return out
            junk = junk[: -len("_rank1")]
        return spoil(out, junk, batch)


def spoil(out: dict[str, Any], junk: str, batch: Batch) -> Any:
    """`out` with the named problem."""
    e, f = out["energy"], out["forces"]
    if junk == "clean":
        return out
    if junk == "list":
        return [e, f]
    if junk == "tuple":
        return (e, f)
    if junk == "none_value":
        return {**out, "forces": None}
    if junk == "float_value":
        return {**out, "energy": float(e.sum())}
    if junk == "numpy_value":
        return {**out, "forces": f.detach().numpy()}
    if junk == "int_dtype":
        return {**out, "energy": e.round().to(torch.int64)}
    if junk == "int_forces":
        return {**out, "forces": (f * 100).round().to(torch.int32)}
    if junk == "float32_forces":
        return {**out, "forces": f.to(torch.float32)}
    if junk == "complex_forces":
        return {**out, "forces": f.to(torch.complex128)}
    if junk == "bool_dtype":
        return {**out, "mask": torch.ones(batch.num_atoms, dtype=torch.bool)}
    if junk == "nan":
        return {**out, "energy": e * float("nan")}
    if junk == "inf":
        return {**out, "forces": torch.where(f.abs() > 0.01, f / 0.0, f)}
    if junk == "neg_inf_one":
        e2 = e.clone()
        e2[0] = -float("inf")
        return {**out, "energy": e2}
    if junk == "drop_row":
        return {**out, "forces": f[:-1]}
    if junk == "extra_row":
        return {**out, "forces": torch.cat([f, f[:1]])}
    if junk == "scalar_forces":
        return {**out, "forces": f.sum()}
    if junk == "trailing":
        return {**out, "forces": torch.cat([f, f[:, :1]], dim=1)}
    if junk == "energy_column":
        return {**out, "energy": e[:, None]}
    if junk == "flat_forces":
        return {**out, "forces": f.reshape(-1)}
    if junk == "missing":
        return {"energy": e}
    if junk == "extra":
        return {**out, "debug": e * 2}
    raise ValueError(f"unknown junk {junk!r}")


def factory(junk: str) -> JunkOutputs:
    """The model with the named junk."""
    return JunkOutputs(junk).double()


def sample_batch() -> Batch:
    """One periodic 8 x 8 x 40 Å box (100 atoms), long enough for owned, halo and remote atoms at world size 2."""
    return make_batch([periodic_slab_system((2, 2, 25), seed=3)])


JUNK = (
    "clean",
    "list",
    "tuple",
    "none_value",
    "float_value",
    "numpy_value",
    "int_dtype",
    "int_forces",
    "complex_forces",
    "float32_forces",
    "bool_dtype",
    "nan",
    "inf",
    "neg_inf_one",
    "drop_row",
    "extra_row",
    "scalar_forces",
    "trailing",
    "energy_column",
    "flat_forces",
    "missing",
    "extra",
)


def _make(name: str) -> Any:
    def made() -> JunkOutputs:
        return factory(name)

    made.__name__ = made.__qualname__ = f"factory_{name}"
    return made


for _junk in JUNK:
    for _suffix in ("", "_ranks", "_rank1"):
        globals()[f"factory_{_junk}{_suffix}"] = _make(_junk + _suffix)
