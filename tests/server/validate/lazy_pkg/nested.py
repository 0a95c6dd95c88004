"""Per-system sums as methods of a class nested in another (`Outer.Inner`), and a static and a class
method a subclass inherits (`Child` from `Base`). Each sums inside TorchScript, so the runtime cannot
see the sum: on a rank it covers owned and halo rows unless a `method` adapter is declared."""

from __future__ import annotations

import warnings

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def _scripted_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=e.dtype, device=e.device).index_add(0, batch, e)


def _sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
    out: torch.Tensor = _scripted_sum(e, batch, int(n))
    return out


class Outer:
    """Holds the class whose methods are the helpers."""

    class Inner:
        """A plain, a static and a class method, each a per-system sum."""

        scale = 1.0

        def plain(self, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
            return self.scale * _sum(e, batch, n)

        @staticmethod
        def static_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
            return _sum(e, batch, n)

        @classmethod
        def class_sum(cls, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
            return cls.scale * _sum(e, batch, n)

    Alias = Inner  # the same class under a second name: traced once, as Outer.Inner


class Base:
    """A static and a class method that `Child` inherits."""

    @staticmethod
    def static_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return _sum(e, batch, n)

    @classmethod
    def class_sum(cls, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return _sum(e, batch, n)


class Child(Base):
    """Inherits both: an adapter of `Child.static_sum` must leave `Base` alone."""


def owned_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
    """A `replacement` for `Outer.Inner.static_sum`: called with its arguments as the call gave them."""
    return -_sum(e, batch, n)
