"""What a spare runs before its job so that the job's first forward does not pay for loading kernels.

With CUDA's lazy module loading (the default, and what a spare keeps: eager loading costs each spare
seconds and GPU memory, `bench/RESULTS_gpu.md`) the first call of an operator family loads its module,
and a model's first forward + forces calls dozens of them: most of a first forward in a warm spare
that skipped this warm-up is that loading (`bench/RESULTS_gpu.md`). Loading is per process and per
family, not per model: calling each family once, on tiny tensors, forward and backward, in float64 and
float32, loads what any model's use of it would. So the warm-up covers the operator families
interatomic potentials are built from (elementwise maths, comparisons and selections, reductions,
gathers and scatters by an index, sorting, linear algebra, layer norms and softmax, casts and copies),
not the ones one model uses.

Rules: fixed values only, never a random draw (the factory that runs next must find torch's, numpy's
and Python's generators as the fork left them: `model_build.FACTORY_SEED`); each family on its own, so
one this torch lacks costs only itself; and the warm-up stops between families once the spare's job
has arrived (`stop()`), since the job loads what it needs itself and waiting for the rest would only
delay it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

__all__ = ["FAMILIES", "KernelWarmup", "warm_autograd", "warm_kernels"]

_Tensor = torch.Tensor


def _values(device: torch.device, dtype: torch.dtype, *shape: int, grad: bool = True) -> _Tensor:
    """Fixed values in (-1, 1), not random ones."""
    n = math.prod(shape)
    x = torch.linspace(-0.9, 0.9, n, dtype=dtype, device=device).reshape(shape)
    return x.requires_grad_(grad)


def warm_autograd(device: torch.device) -> None:
    """One tiny message-passing forward + forces on `device` in float64 and float32: cuBLAS for a
    linear layer, an embedding gather, a gather and an index_add per edge, an index_add per system,
    smooth activations and `autograd.grad` (its engine's device threads start here)."""
    for dtype in (torch.float64, torch.float32):
        pos = _values(device, dtype, 8, 3)
        edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]], device=device)
        table = _values(device, dtype, 4, 16)
        weight = _values(device, dtype, 16, 16)
        vec = pos[edges[1]] - pos[edges[0]]
        r = torch.linalg.vector_norm(vec, dim=-1)
        h = F.embedding(torch.zeros(8, dtype=torch.long, device=device), table)
        messages = F.silu(F.linear(h[edges[1]], weight)) * torch.exp(-r).unsqueeze(-1)
        h = h + torch.zeros_like(h).index_add(0, edges[0], messages)
        e_atom = torch.tanh(h @ weight).sum(dim=1)
        energy = torch.zeros(1, dtype=dtype, device=device).index_add(
            0, torch.zeros(8, dtype=torch.long, device=device), e_atom
        )
        (grad,) = torch.autograd.grad(energy, pos, grad_outputs=torch.ones_like(energy))
        del grad


def _elementwise(x: _Tensor) -> _Tensor:
    y = x.abs() + 1.5
    parts = [
        torch.sin(x),
        torch.cos(x),
        torch.tan(x),
        torch.exp(x),
        torch.expm1(x),
        torch.log(y),
        torch.log1p(y),
        torch.sqrt(y),
        torch.rsqrt(y),
        torch.tanh(x),
        torch.sigmoid(x),
        F.silu(x),
        F.softplus(x),
        F.gelu(x),
        F.elu(x),
        F.relu(x),
        torch.erf(x),
        torch.erfc(x),
        torch.atan(x),
        torch.asin(x),
        torch.acos(x),
        torch.sinh(x),
        torch.cosh(x),
        torch.reciprocal(y),
        -x,
        torch.sinc(x),
        torch.square(x),
        x**2,
        x**3,
        y**0.5,
        y**-1.5,
        torch.pow(y, x),
        torch.atan2(x, y),
        x * y,
        x / y,
        x - y,
        torch.maximum(x, -x),
        torch.minimum(x, -x),
        torch.clamp(x, -0.5, 0.5),
        torch.clamp(x, min=0.0),
        torch.remainder(y, 0.7),
        torch.fmod(y, 0.7),
        torch.hypot(x, y),
        torch.lerp(x, y, 0.3),
        torch.addcmul(x, x, y),
        torch.addcdiv(x, x, y),
        torch.xlogy(y, y),
        torch.logaddexp(x, y),
        torch.heaviside(x, y).detach(),
        torch.sign(x).detach(),
        torch.floor(x).detach(),
        torch.round(x).detach(),
        torch.nan_to_num(x),
    ]
    return torch.stack([p.reshape(-1) for p in parts]).sum()


def _selections(x: _Tensor) -> _Tensor:
    mask = (x < 0.1) & (x > -0.5) | (x >= 0.8) | ~(x <= -0.8) ^ (x == 0.0)
    ne = (x != 0.2).logical_and(x.isfinite()).logical_or(x.isnan()).logical_not()
    picked = torch.where(mask, x, torch.zeros_like(x)) + torch.where(ne, 1.0, x)
    filled = x.masked_fill(mask, 0.0) + x * mask + torch.nonzero(mask).numel()
    return picked.sum() + filled.sum() + x[mask].sum() + torch.masked_select(x, ne).sum()


def _reductions(x: _Tensor) -> _Tensor:
    total: _Tensor = (
        x.sum()
        + x.sum(dim=0).sum()
        + x.mean(dim=1).sum()
        + x.amax(dim=0).sum()
        + x.amin(dim=1).sum()
        + x.max()
        + x.min()
        + x.max(dim=1).values.sum()
        + x.min(dim=0).values.sum()
        + x.prod(dim=1).sum()
        + torch.linalg.vector_norm(x, dim=-1).sum()
        + x.norm()
        + x.cumsum(dim=0).sum()
        + x.cumprod(dim=1).sum()
        + x.std(dim=0).sum()
        + x.var()
        + torch.logsumexp(x, dim=1).sum()
        + F.softmax(x, dim=-1).sum()
        + F.log_softmax(x, dim=0).sum()
        + x.argmax()
        + x.argmin(dim=1).sum()
        + x.abs().sum()
        + x.all().to(x.dtype)
        + x.any(dim=1).sum()
        + torch.count_nonzero(x)
    )
    return total


def _indexing(x: _Tensor) -> _Tensor:
    device = x.device
    n = x.shape[0]
    idx = torch.tensor([0, 2, 1, 3, 3, 0], device=device) % n
    rows = idx.unsqueeze(-1).expand(-1, x.shape[1])
    out = torch.zeros(n, x.shape[1], dtype=x.dtype, device=device)
    total = x.index_select(0, idx).sum() + x[idx].sum() + torch.gather(x, 0, rows).sum()
    total = total + out.index_add(0, idx, x[idx]).sum() + out.scatter_add(0, rows, x[idx]).sum()
    total = (
        total + out.scatter(0, rows, x[idx]).sum() + out.index_copy(0, torch.arange(n, device=device), x[idx[:n]]).sum()
    )
    for reduce in ("sum", "mean", "amax", "amin", "prod"):
        total = total + out.scatter_reduce(0, rows, x[idx], reduce=reduce, include_self=False).sum()
    put = out.index_put((idx,), x[idx], accumulate=True) + out.index_put((idx,), x[idx])
    total = total + put.sum() + torch.take_along_dim(x, rows[:n], dim=0).sum()
    counts = torch.bincount(idx, minlength=n) + idx.unique(return_counts=True)[1].sum()  # type: ignore[no-untyped-call]
    total = (
        total
        + counts.sum()
        + idx.repeat_interleave(counts[idx]).sum()
        + torch.unique_consecutive(idx.sort().values).sum()
    )
    values, order = torch.sort(x.detach().reshape(-1))
    total = total + values.sum() + order.sum() + torch.argsort(idx, stable=True).sum() + x.topk(2, dim=1).values.sum()
    edges = torch.searchsorted(values, values[:3]) + torch.bucketize(values[:3], values)
    result: _Tensor = total + edges.sum() + F.one_hot(idx, n).sum() + F.embedding(idx, x).sum()
    return result


def _shapes_and_casts(x: _Tensor) -> _Tensor:
    device, dtype = x.device, x.dtype
    joined = torch.cat([x, x.flip(0)], dim=1) + torch.stack([x, x.roll(1, 0)], dim=-1).sum(-1).repeat(1, 2)
    square = x[:, :3] if x.shape[0] >= 3 else x
    made = (
        torch.arange(6, device=device)
        + torch.ones(6, device=device, dtype=torch.long)
        + torch.full((6,), 2, device=device)
    )
    grids = torch.linspace(0, 1, 6, device=device, dtype=dtype) + torch.eye(6, device=device, dtype=dtype).sum(0)
    cast = x.double().float().to(dtype) + x.long().to(dtype) + x.bool().to(dtype) + x.half().to(dtype)
    copied = x.t().contiguous().t() + x.unsqueeze(0).expand(2, -1, -1).contiguous().sum(0) + x.clone()
    return (
        joined.sum()
        + torch.triu(square).sum()
        + torch.tril(square).sum()
        + made.sum()
        + grids.sum()
        + cast.sum()
        + copied.sum()
        + x.new_zeros(3).sum()
        + x.new_ones(3).sum()
        + torch.zeros_like(x).sum()
    )


def _linear_algebra(x: _Tensor) -> _Tensor:
    n, f = x.shape
    w = x.t()[:, :f] if n >= f else x.t() @ x
    b = x.unsqueeze(0).expand(3, -1, -1)
    total = (x @ x.t()).sum() + torch.mm(x, x.t()).sum() + torch.addmm(x[:, :1], x, x.t()[:, :1]).sum()
    total = (
        total + torch.bmm(b, b.transpose(1, 2)).sum() + torch.baddbmm(b[:, :, :1], b, b.transpose(1, 2)[:, :, :1]).sum()
    )
    total = total + torch.einsum("ij,kj->ik", x, x).sum() + torch.einsum("bij,bkj->bik", b, b).sum()
    total = total + torch.outer(x[:, 0], x[:, 1]).sum() + F.linear(x, w, x[0, : w.shape[0]]).sum()
    total = total + torch.linalg.cross(x[:, :3], x.flip(0)[:, :3], dim=-1).sum() + (x * x).sum(-1).sqrt().sum()
    total = total + torch.tensordot(x, x, dims=([1], [1])).sum() + torch.kron(x[:2, :2], x[:2, :2]).sum()
    result: _Tensor = total + torch.matmul(x, x[0]).sum() + torch.dot(x[0], x[1]) + torch.mv(x, x[0]).sum()
    return result


def _normalization(x: _Tensor) -> _Tensor:
    f = x.shape[1]
    weight = torch.ones(f, dtype=x.dtype, device=x.device)
    return (
        F.layer_norm(x, (f,), weight, weight).sum()
        + F.normalize(x, dim=-1).sum()
        + F.rms_norm(x, (f,)).sum()
        + F.cosine_similarity(x, x.flip(0), dim=-1).sum()
        + F.pairwise_distance(x, x.flip(0)).sum()
        + torch.cdist(x, x).sum()
        + F.mse_loss(x, x.flip(0))
        + F.smooth_l1_loss(x, x.flip(0))
    )


FAMILIES: tuple[tuple[str, Callable[[_Tensor], _Tensor]], ...] = (
    ("elementwise", _elementwise),
    ("selections", _selections),
    ("reductions", _reductions),
    ("indexing", _indexing),
    ("shapes_and_casts", _shapes_and_casts),
    ("linear_algebra", _linear_algebra),
    ("normalization", _normalization),
)
"""The operator families the warm-up calls, each forward and backward, in float64 and float32."""


class KernelWarmup(NamedTuple):
    """Which families `warm_kernels` warmed, which failed (`"name: ExceptionType"`: an operator this
    torch lacks) and which it skipped because the job came first."""

    warmed: list[str]
    failed: list[str]
    skipped: list[str]


def warm_kernels(device: torch.device, stop: Callable[[], bool] = lambda: False) -> KernelWarmup:
    """Call every family of `FAMILIES` on `device`, forward and backward, in float64 and float32,
    until `stop()` says the job has come."""
    done = KernelWarmup([], [], [])
    for name, family in FAMILIES:
        if done.skipped or stop():
            done.skipped.append(name)
            continue
        try:
            for dtype in (torch.float64, torch.float32):
                x = _values(device, dtype, 4, 6)
                total = family(x)
                if total.requires_grad:
                    (grad,) = torch.autograd.grad(total, x, allow_unused=True)
                    del grad
            done.warmed.append(name)
        except Exception as exc:  # one family this torch lacks costs only itself
            done.failed.append(f"{name}: {type(exc).__name__}")
    return done
