"""`Batch`: the atoms a wrapper sees — positions, species, cells, periodicity, system index.

A batch holds one or more systems. Rows are atoms; `batch[i]` is the system of atom `i` and is
sorted. Neighbour lists are built on request with vesin, honouring each system's cell and pbc.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

__all__ = ["Batch", "CompatibleBatch", "NeighborList", "as_batch"]

CELL_CONDITION_LIMIT = 1e6
"""The largest condition number (largest over smallest singular value) of a system's nonzero cell
vectors: above it they are (nearly) linearly dependent, whichever axes are periodic. A zero vector, on
a non-periodic axis, is no cell vector and is left out."""


def _cell_problem(cell: torch.Tensor) -> str | None:
    """Why `cell` (3 × 3, rows the cell vectors) is unusable, or None: its nonzero vectors must be
    linearly independent by `CELL_CONDITION_LIMIT`."""
    vectors = cell.detach().to("cpu", torch.float64).numpy()
    nonzero = [a for a in range(3) if np.linalg.norm(vectors[a]) > 0.0]
    if not nonzero:
        return None
    singular = np.linalg.svd(vectors[nonzero], compute_uv=False)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0.0 else float("inf")
    if condition <= CELL_CONDITION_LIMIT:
        return None
    axes = ", ".join(str(a) for a in nonzero)
    return (
        f"the cell vectors of axes {axes} are (nearly) linearly dependent (condition number {condition:.3g} > "
        f"{CELL_CONDITION_LIMIT:g}); give independent cell vectors, or a zero vector for an axis that is not "
        "periodic"
    )


@runtime_checkable
class CompatibleBatch(Protocol):
    """Anything with positions, cell and pbc (and optionally `batch`) is accepted as a batch."""

    positions: Any
    cell: Any
    pbc: Any


@dataclass(frozen=True)
class NeighborList:
    """Directed edges `i -> j` within a cutoff, as row indices into the batch that built them.

    `edge_index[0]` is the centre `i`, `edge_index[1]` the neighbour `j`; the vector from `i` to
    `j` is `positions[j] - positions[i] + shifts @ cell[batch[i]]` (`shifts` are integer cell
    translations, stored in the positions' dtype so they can multiply a cell directly).
    """

    edge_index: torch.Tensor
    shifts: torch.Tensor

    @property
    def num_edges(self) -> int:
        """Number of directed edges."""
        return int(self.edge_index.shape[1])

    def vectors(self, positions: torch.Tensor, cell: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        """Edge vectors recomputed from live `positions` and `cell` (differentiable in both)."""
        i, j = self.edge_index[0], self.edge_index[1]
        sys_cell = cell[batch[i]]
        return positions[j] - positions[i] + torch.einsum("ek,ekl->el", self.shifts, sys_cell)


def _field_error(name: str, problem: str) -> ValueError:
    return ValueError(f"Batch.{name}: {problem}")


class Batch:
    """Atoms of one or more systems, validated on construction.

    Fields: `positions [N,3]` float, `atomic_numbers [N]` long, `cell [B,3,3]`, `pbc [B,3]` bool,
    `batch [N]` long (system of each atom, sorted; default all zeros), `charge [B]` (optional total
    charge per system) and free-form `extras`. A `[3,3]` cell or `[3]` pbc is taken as one system.
    Raises `ValueError` naming the offending field when the data is inconsistent.
    """

    positions: torch.Tensor
    atomic_numbers: torch.Tensor
    cell: torch.Tensor
    pbc: torch.Tensor
    batch: torch.Tensor
    charge: torch.Tensor | None
    extras: dict[str, Any]

    def __init__(
        self,
        positions: Any,
        atomic_numbers: Any,
        cell: Any = None,
        pbc: Any = None,
        batch: Any = None,
        charge: Any = None,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        pos = torch.as_tensor(positions)
        if not pos.is_floating_point():
            pos = pos.to(torch.get_default_dtype())
        if pos.ndim != 2 or pos.shape[1] != 3:
            raise _field_error("positions", f"expected shape [N, 3], got {list(pos.shape)}")
        if not bool(torch.isfinite(pos).all()):
            bad = int((~torch.isfinite(pos)).any(dim=1).nonzero()[0, 0])
            raise _field_error("positions", f"non-finite coordinate at atom {bad}; fix the structure")
        n = pos.shape[0]
        z = torch.as_tensor(atomic_numbers)
        if z.is_floating_point() or z.dtype == torch.bool:
            raise _field_error("atomic_numbers", f"expected an integer tensor, got {z.dtype}")
        z = z.to(torch.long)
        if z.shape != (n,):
            raise _field_error("atomic_numbers", f"expected shape [{n}], got {list(z.shape)}")
        if n and int(z.min()) < 0:
            raise _field_error("atomic_numbers", "atomic numbers must be >= 0")

        if batch is None:
            sys_idx = torch.zeros(n, dtype=torch.long, device=pos.device)
        else:
            sys_idx = torch.as_tensor(batch, device=pos.device)
            if sys_idx.is_floating_point() or sys_idx.dtype == torch.bool:
                raise _field_error("batch", f"expected an integer tensor, got {sys_idx.dtype}")
            sys_idx = sys_idx.to(torch.long)
            if sys_idx.shape != (n,):
                raise _field_error("batch", f"expected shape [{n}], got {list(sys_idx.shape)}")
            if n and int(sys_idx.min()) < 0:
                raise _field_error("batch", "system indices must be >= 0")
            if n > 1 and bool((sys_idx[1:] < sys_idx[:-1]).any()):
                raise _field_error("batch", "system indices must be sorted (atoms of a system contiguous)")

        inferred_b = int(sys_idx.max()) + 1 if n else 1
        c = torch.zeros(3, 3, dtype=pos.dtype) if cell is None else torch.as_tensor(cell)
        c = c.to(dtype=pos.dtype, device=pos.device)
        if c.ndim == 2:
            c = c.unsqueeze(0)
        if c.ndim != 3 or c.shape[1:] != (3, 3):
            raise _field_error("cell", f"expected shape [B, 3, 3] or [3, 3], got {list(c.shape)}")
        if c.shape[0] == 1 and inferred_b > 1:
            c = c.expand(inferred_b, 3, 3).clone()
        num_systems = c.shape[0]
        if num_systems < inferred_b:
            raise _field_error("cell", f"{num_systems} cells for {inferred_b} systems in Batch.batch")
        if not bool(torch.isfinite(c).all()):
            raise _field_error("cell", "non-finite cell entry")

        p = torch.zeros(3, dtype=torch.bool) if pbc is None else torch.as_tensor(pbc)
        if p.ndim == 0:
            p = p.reshape(1).expand(3)
        if p.ndim == 1:
            p = p.unsqueeze(0)
        if p.ndim != 2 or p.shape[1] != 3:
            raise _field_error("pbc", f"expected shape [B, 3] or [3], got {list(p.shape)}")
        p = p.to(torch.bool).to(pos.device)
        if p.shape[0] == 1 and num_systems > 1:
            p = p.expand(num_systems, 3).clone()
        if p.shape[0] != num_systems:
            raise _field_error("pbc", f"expected {num_systems} rows (one per system), got {p.shape[0]}")
        for s in range(num_systems):
            for axis in range(3):
                if bool(p[s, axis]) and float(torch.linalg.vector_norm(c[s, axis])) == 0.0:
                    raise _field_error("cell", f"system {s} is periodic along axis {axis} but that cell vector is zero")
            problem = _cell_problem(c[s])
            if problem is not None:
                raise _field_error("cell", f"system {s}: {problem}")

        q = None
        if charge is not None:
            q = torch.as_tensor(charge, device=pos.device)
            if q.ndim == 0:
                q = q.reshape(1)
            if q.shape != (num_systems,):
                raise _field_error("charge", f"expected shape [{num_systems}], got {list(q.shape)}")
            q = q.to(pos.dtype)

        self.positions = pos
        self.atomic_numbers = z.to(pos.device)
        self.cell = c
        self.pbc = p
        self.batch = sys_idx
        self.charge = q
        self.extras = dict(extras or {})

    # -- basic properties -------------------------------------------------------------------
    @property
    def num_atoms(self) -> int:
        """Number of atom rows."""
        return int(self.positions.shape[0])

    @property
    def num_systems(self) -> int:
        """Number of systems (one cell each), including systems that hold no rows here."""
        return int(self.cell.shape[0])

    @property
    def device(self) -> torch.device:
        """Device of the positions."""
        return self.positions.device

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the positions."""
        return self.positions.dtype

    def __len__(self) -> int:
        return self.num_atoms

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_atoms={self.num_atoms}, num_systems={self.num_systems}, "
            f"dtype={self.dtype}, device={self.device})"
        )

    def system_slices(self) -> list[slice]:
        """Row range of each system (empty slices for systems with no rows)."""
        counts = torch.bincount(self.batch, minlength=self.num_systems).tolist()
        out, start = [], 0
        for c in counts:
            out.append(slice(start, start + int(c)))
            start += int(c)
        return out

    # -- conversion -------------------------------------------------------------------------
    def _replace(self, **tensors: Any) -> Batch:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(tensors)
        new.extras = dict(self.extras)
        return new

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Batch:
        """A copy on `device` and/or with floating fields cast to `dtype` (extras' tensors moved too)."""

        def move(t: torch.Tensor) -> torch.Tensor:
            if dtype is not None and t.is_floating_point():
                t = t.to(dtype)
            return t.to(device) if device is not None else t

        new = self._replace(
            positions=move(self.positions),
            atomic_numbers=move(self.atomic_numbers),
            cell=move(self.cell),
            pbc=move(self.pbc),
            batch=move(self.batch),
            charge=None if self.charge is None else move(self.charge),
        )
        new.extras = {k: move(v) if isinstance(v, torch.Tensor) else v for k, v in self.extras.items()}
        return new

    def clone(self) -> Batch:
        """A deep copy of every tensor (extras' tensors cloned too)."""
        new = self._replace(
            positions=self.positions.detach().clone(),
            atomic_numbers=self.atomic_numbers.clone(),
            cell=self.cell.detach().clone(),
            pbc=self.pbc.clone(),
            batch=self.batch.clone(),
            charge=None if self.charge is None else self.charge.clone(),
        )
        new.extras = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in self.extras.items()}
        return new

    def to_state(self) -> dict[str, Any]:
        """Plain dict of CPU tensors (picklable, used to ship a batch to rank processes)."""
        b = self.to("cpu")
        return {
            "positions": b.positions.detach(),
            "atomic_numbers": b.atomic_numbers,
            "cell": b.cell.detach(),
            "pbc": b.pbc,
            "batch": b.batch,
            "charge": b.charge,
            "extras": b.extras,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Batch:
        """Inverse of `to_state`."""
        return Batch(**dict(state))

    # -- neighbour lists --------------------------------------------------------------------
    def neighbor_list(self, cutoff: float) -> NeighborList:
        """Full directed neighbour list (both `i->j` and `j->i`) within `cutoff` Å, via vesin.

        Periodic images are honoured per system and per axis; an atom is never its own neighbour
        unless a periodic image of it lies within the cutoff (then with a non-zero shift).
        """
        from .neighbors import full_neighbor_list

        return full_neighbor_list(self, cutoff)

    # -- construction from structures -------------------------------------------------------
    @classmethod
    def from_ase(cls, atoms: Any, dtype: torch.dtype = torch.float64) -> Batch:
        """Batch from one `ase.Atoms` or a list of them (one system each, in order)."""
        frames = list(atoms) if isinstance(atoms, (list, tuple)) else [atoms]
        if not frames:
            raise ValueError("Batch.from_ase: got an empty list; pass at least one ase.Atoms")
        pos, z, cells, pbcs, sys, charges = [], [], [], [], [], []
        for s, a in enumerate(frames):
            if not hasattr(a, "get_positions"):
                raise TypeError(f"Batch.from_ase: item {s} is {type(a).__name__}, expected ase.Atoms")
            pos.append(np.asarray(a.get_positions()))
            z.append(np.asarray(a.get_atomic_numbers()))
            cells.append(np.asarray(a.get_cell()[:]))
            pbcs.append(np.asarray(a.get_pbc()))
            sys.append(np.full(len(a), s))
            charges.append(float(np.sum(a.get_initial_charges())) if len(a) else 0.0)
        return cls(
            positions=torch.as_tensor(np.concatenate(pos), dtype=dtype),
            atomic_numbers=torch.as_tensor(np.concatenate(z), dtype=torch.long),
            cell=torch.as_tensor(np.stack(cells), dtype=dtype),
            pbc=torch.as_tensor(np.stack(pbcs), dtype=torch.bool),
            batch=torch.as_tensor(np.concatenate(sys), dtype=torch.long),
            charge=torch.as_tensor(charges, dtype=dtype),
        )

    @classmethod
    def read(cls, path: str | os.PathLike[str], index: str | int = ":", dtype: torch.dtype = torch.float64) -> Batch:
        """Batch from any structure file ASE can read (every frame a system by default)."""
        import ase.io

        if not os.path.exists(path):
            raise FileNotFoundError(f"Batch.read: no such structure file: {os.fspath(path)}")
        try:
            frames = ase.io.read(os.fspath(path), index=index)
        except Exception as exc:  # ASE raises many unrelated types for unreadable files
            raise ValueError(
                f"Batch.read: ASE could not read {os.fspath(path)} ({type(exc).__name__}: {exc}); "
                "check the file format or pass format-specific data through Batch.from_ase"
            ) from exc
        return cls.from_ase(frames, dtype=dtype)

    def to_ase(self) -> list[Any]:
        """One `ase.Atoms` per system."""
        import ase

        out = []
        for s, sl in enumerate(self.system_slices()):
            out.append(
                ase.Atoms(
                    numbers=self.atomic_numbers[sl].cpu().numpy(),
                    positions=self.positions[sl].detach().cpu().numpy(),
                    cell=self.cell[s].detach().cpu().numpy(),
                    pbc=self.pbc[s].cpu().numpy(),
                )
            )
        return out


def as_batch(obj: Any) -> Batch:
    """Coerce a `Batch` or any compatible object (positions/cell/pbc, optional batch) into a `Batch`.

    Raises `TypeError` saying what is missing when `obj` is not batch-like.
    """
    if isinstance(obj, Batch):
        return obj
    try:
        import ase

        if isinstance(obj, ase.Atoms) or (
            isinstance(obj, (list, tuple)) and obj and all(isinstance(a, ase.Atoms) for a in obj)
        ):
            return Batch.from_ase(obj)
    except ImportError:  # pragma: no cover - ase is a dependency
        pass
    missing = [a for a in ("positions", "cell", "pbc") if not hasattr(obj, a)]
    if missing:
        raise TypeError(
            f"expected a distcheck.Batch or an object with positions, cell and pbc; "
            f"{type(obj).__name__} lacks {', '.join(missing)}. Build one with distcheck.Batch(...) "
            "or Batch.from_ase(atoms)."
        )
    z = None
    for name in ("atomic_numbers", "numbers", "z", "species"):
        if hasattr(obj, name):
            z = getattr(obj, name)
            break
    if z is None:
        raise TypeError(
            f"{type(obj).__name__} has positions/cell/pbc but no atomic_numbers (or numbers/z); "
            "add one or build a distcheck.Batch"
        )
    sys_idx = getattr(obj, "batch", None)
    if sys_idx is None:
        cell = torch.as_tensor(obj.cell)
        if cell.ndim == 3 and cell.shape[0] > 1:
            raise TypeError(f"{type(obj).__name__} holds {cell.shape[0]} cells but no `batch` system index; add one")
    return Batch(
        positions=obj.positions,
        atomic_numbers=z,
        cell=obj.cell,
        pbc=obj.pbc,
        batch=sys_idx,
        charge=getattr(obj, "charge", None),
        extras=getattr(obj, "extras", None),
    )
