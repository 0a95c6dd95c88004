"""The torch functions distcheck's own comparison and consolidation compute with: none a user can replace.

The rule: what decides a verdict in the process that asks for a validation (consolidating the ranks'
outputs, handling the reference's, comparing them, the round-off floor, the sample's checks) never
calls `torch.<op>`, a `torch.Tensor` method or a tensor operator (`a - b`, `a & b`, `t[i]`,
`float(t)`). Those are attributes a model module may have replaced when it was imported into this
process (`torch.Tensor.index_add_ = counting(...)`, `torch.exp = ...`): in the user's own script, in
the CLI, in the editor's runner. It calls the names below instead: the C-level functions of
`torch._C._VariableFunctions` and the methods of `torch._C.TensorBase`, which are immutable types
(assigning to them raises), taken when this module is imported; methods take the tensor first
(`pristine.index_add_(t, 0, ids, values)`). Metadata (`shape`, `dtype`, `device`, `ndim`) is read as
it is. And it runs inside `shielded()`: with torch-function handling off (a `TorchFunctionMode` the
user left pushed, a tensor subclass' `__torch_function__`) and the global module hooks
(`torch.nn.modules.module.register_module_forward_hook` and the like) out of the way; never call user
code inside it.

This is the caller's side of warm-equals-cold (`shared/DESIGN.md` 2.6). Ranks and the reference run
the user's module as a fresh process would, patches included; a process in which such an import
changed torch's global state serves no further run (`isolation.torch_surface`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.modules.module as _module

__all__ = [
    "float_of",
    "int_of",
    "shielded",
    "truth",
]

_VF = torch._C._VariableFunctions
_TB = torch._C.TensorBase

# -- functions (torch._C._VariableFunctions) -------------------------------------------------------
abs = _VF.abs
add = _VF.add
allclose = _VF.allclose
amax = _VF.amax
argmax = _VF.argmax
argsort = _VF.argsort
bincount = _VF.bincount
cat = _VF.cat
clamp = _VF.clamp
clamp_min = _VF.clamp_min
div = _VF.div
eq = _VF.eq
equal = _VF.equal
floor = _VF.floor
full_like = _VF.full_like
isclose = _VF.isclose
isfinite = _VF.isfinite
isinf = _VF.isinf
isnan = _VF.isnan
le = _VF.le
gt = _VF.gt
logical_and = _VF.logical_and
logical_not = _VF.logical_not
logical_or = _VF.logical_or
mul = _VF.mul
nan_to_num = _VF.nan_to_num
promote_types = _VF.promote_types
remainder = _VF.remainder
round = _VF.round
stack = _VF.stack
sub = _VF.sub
sum = _VF.sum
where = _VF.where
zeros = _VF.zeros

# -- methods (torch._C.TensorBase), the tensor first ------------------------------------------------
any = _TB.any
clone = _TB.clone
detach = _TB.detach
getitem = _TB.__getitem__
index_add_ = _TB.index_add_
item = _TB.item
max = _TB.max
new_zeros = _TB.new_zeros
nonzero = _TB.nonzero
numel = _TB.numel
reshape = _TB.reshape
scatter_reduce = _TB.scatter_reduce
setitem = _TB.__setitem__
to = _TB.to
tolist = _TB.tolist

# -- types and constants, as torch had them when distcheck was imported -----------------------------
finfo = torch.finfo
float64 = torch.float64
float32 = torch.float32
complex128 = torch.complex128
complex64 = torch.complex64
long = torch.long
int64 = torch.int64
bool_ = torch.bool

_DisableTorchFunction: Any = torch._C.DisableTorchFunction
_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
)


def float_of(value: torch.Tensor) -> float:
    """A one-element tensor as a Python float (`float(t)` goes through `Tensor.__float__`)."""
    return float(item(value))


def int_of(value: torch.Tensor) -> int:
    """A one-element tensor as a Python int."""
    return int(item(value))


def truth(value: torch.Tensor) -> bool:
    """A one-element tensor as a Python bool (`bool(t)` goes through `Tensor.__bool__`)."""
    return bool(item(value))


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Run distcheck's own tensor code with torch-function handling off and the global module hooks
    out of the way (put back on exit, however it exits). Never call user code inside."""
    aside: list[tuple[dict[Any, Any], dict[Any, Any]]] = []
    for name in _HOOKS:
        hooks = getattr(_module, name, None)
        if isinstance(hooks, dict) and hooks:
            aside.append((hooks, dict(hooks)))
            hooks.clear()
    try:
        with _DisableTorchFunction():
            yield
    finally:
        for hooks, saved in aside:
            hooks.update(saved)
