"""Building the user's model the same way in every process, and a fingerprint of what was built.

The reference process and every rank call the factory afresh. A factory that draws its initial
parameters without seeding (`nn.Linear` in `__init__`, no checkpoint loaded) builds a different model
in each process unless each starts from the same random state, and the state a process has when its
factory runs depends on what ran before in it (a spare's warm-up, a resident rank's earlier attempt).
So `build_wrapper` seeds torch's generators (CPU and CUDA), numpy's global one and Python's `random`
to `FACTORY_SEED` before importing the factory's module and again before calling the factory.

`weights_fingerprint` summarises the parameters and buffers of the built model, so the validator
can tell a factory that still builds different models per process (seeded from the clock or
`os.urandom`, reading a file or environment variable that differs) from a wrong spec
(`validate.model_identity`).
"""

from __future__ import annotations

import inspect
import random
import sys
from typing import Any, Protocol

import torch

__all__ = ["FACTORY_SEED", "FactoryLike", "build_wrapper", "seed_generators", "weights_fingerprint"]

FACTORY_SEED = 0
"""The seed every process's generators get before the user's factory module is imported and called."""


class FactoryLike(Protocol):
    """A `FactoryRef`, or a spare's `Prebuilt` that duck-types it."""

    def load(self) -> Any: ...


def seed_generators() -> None:
    """Seed torch (CPU and every CUDA device, lazily when CUDA is not initialised), numpy's global
    generator when numpy is imported, and Python's `random`, all to `FACTORY_SEED`."""
    torch.manual_seed(FACTORY_SEED)
    random.seed(FACTORY_SEED)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(FACTORY_SEED)


def build_wrapper(factory: FactoryLike, device: torch.device) -> Any:
    """The wrapper `factory` builds, moved to `device` when it is an `nn.Module`, built from the same
    random state in every process: generators seeded before the factory's module is imported (its
    module-level draws) and again before the factory is called (numpy may have been imported since)."""
    seed_generators()
    make = factory.load()
    seed_generators()
    wrapper = make()
    if isinstance(wrapper, torch.nn.Module):
        wrapper = wrapper.to(device)
    return wrapper


def _module_of(wrapper: Any) -> torch.nn.Module | None:
    owner = wrapper.__self__ if inspect.ismethod(wrapper) else wrapper  # a bound method: its object
    return owner if isinstance(owner, torch.nn.Module) else None


def weights_fingerprint(wrapper: Any) -> dict[str, list[float]] | None:
    """`{name: [numel, sum, sum of squares]}` (float64) for every tensor in the wrapper's `state_dict`
    (parameters and persistent buffers); None when the wrapper is not an `nn.Module` (or a bound method
    of one). Tensors that cannot be summed (uninitialised lazy parameters, meta or sparse tensors) are
    left out. One device-to-host copy for a model on one device."""
    module = _module_of(wrapper)
    if module is None:
        return None
    names: list[str] = []
    sizes: list[float] = []
    stats: list[torch.Tensor] = []
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if not isinstance(t, torch.Tensor) or t.is_meta or t.is_sparse:
                continue
            try:
                x = torch.view_as_real(t) if t.is_complex() else t
                x = x.detach().to(torch.float64)
                stats.append(torch.stack([x.sum(), x.square().sum()]))
            except Exception:  # an uninitialised lazy parameter, a quantised tensor: not compared
                continue
            names.append(name)
            sizes.append(float(t.numel()))
    if not names:
        return {}
    same_device = len({s.device for s in stats}) == 1
    values = (torch.stack(stats).cpu() if same_device else torch.stack([s.cpu() for s in stats])).tolist()
    return {name: [size, *v] for name, size, v in zip(names, sizes, values)}
