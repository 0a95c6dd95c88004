"""Receptive-field measurements remembered for the next validation of the same model on the same sample.

The measurement (`receptive.measure_receptive_field`) costs three more forwards of the sample and the
graph work, which at 100k atoms is the longest step a validation waits for once its ranks have run.
Validating one target again and again with only the spec changed (a quick fix applied, auto-fix, a
re-validation on save of the spec file) measures the same thing each time. So a measurement is
stored under a key of everything a fresh process's measurement would depend on, and a validation
whose key is stored takes it from there and stops the reference child's own measurement:

- the target (the factory as written), the device and the measurement's own code (the environment,
  the interpreter, Python, torch and distcheck versions and the site directories, is the store's:
  `memory.environment`);
- the sample: every tensor of its state, byte for byte;
- the model: the fingerprint of its weights (`model_identity`), what the wrapper declares, the
  neighbour cutoffs its forward asked for, the file (mtime and size) of every module of the user's
  own (not installed, not the standard library) the reference child imported to build and run it,
  the files of the installed packages it imported (`spares.learned.third_party_since`), and every
  environment variable its code read, with its value (`runtime.env_reads`);
- the data files its code opened (`runtime.file_reads`: a config, a table, a checkpoint), each with
  its size and content hash;
- its answers: on the CPU every reference output byte for byte with its dtype and shape, so a change
  of the model that the files, weights and variables do not show (a far hop of weight 1e-7) is a new
  key. On a GPU, whose scatters differ from run to run in the last bits, exact bytes would never match
  twice; there each output's dtype, shape and float64 sums of magnitudes and of squares, to
  `GPU_DIGITS` significant digits, stand in (a change of the model is seen by the files, weights, variables and
  data files above; the outputs catch what none of them shows and moves the sums).

A measurement that did not finish is never stored. A remembered one is the stored dict with
`"remembered": True` (the report's record is the same either way, so two validations of one model
give the same report). The store is `memory.FIELDS` (`<cache>/distcheck/receptive-fields.json`, used
only while it is private, the least recently used measurements out first); DISTCHECK_FIELD_CACHE=0
turns this off. Best effort: an unreadable or unwritable cache only means the field is measured.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from .. import memory
from ..processes.spares.learned import note_env_reads
from ..processes.spares.settings import field_cache_enabled
from ..runtime import pristine as P
from ..runtime.frames import is_user_file
from ..runtime.module_namespace import module_file
from .reference_field import PendingField

__all__ = ["STORE", "field_for", "field_key", "module_files"]

STORE = memory.FIELDS
"""Where the measurements are remembered."""

_MEASUREMENT_CODE = (
    "receptive.py",
    "receptive_graph.py",
    "receptive_floor.py",
    "receptive_isolated.py",
    "receptive_reach.py",
    "sensitivity.py",  # `epsilon_floor`, the noise floor's round-off
    "reference_field.py",
    "field_cache.py",
)


def module_files(names: Iterable[str]) -> dict[str, list[int] | None]:
    """The file of each of the user's own modules in `names` (`frames.is_user_file`: not installed,
    not the standard library, torch or distcheck), with its mtime (ns) and size. Installed packages are
    stamped by `spares.learned.third_party_since` (the key's `packages`). Called in the reference child
    with the modules it imported to build and run the model."""
    found: dict[str, list[int] | None] = {}
    for name in names:
        path = module_file(sys.modules.get(name))
        if path is not None and is_user_file(path):
            found.setdefault(path, memory.file_stamp(path))
    return dict(sorted(found.items()))


_TB = torch._C.TensorBase  # methods no user module can replace (`runtime/pristine`)
_UINT8 = torch.uint8


def _tensor_bytes(value: torch.Tensor) -> tuple[str, bytes]:
    """`value`'s dtype and shape, and its elements' bytes, computed never through a torch function a
    user's module replaced in this process (`pristine`)."""
    with P.shielded():
        t = _TB.contiguous(P.to(P.detach(value), "cpu"))
        data = _TB.numpy(_TB.view(P.reshape(t, (-1,)), _UINT8)).tobytes() if P.numel(t) else b""
    return f"tensor{t.dtype}{tuple(t.shape)}", data


def _digest_into(h: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        head, data = _tensor_bytes(value)
        h.update(head.encode())
        h.update(data)
    elif isinstance(value, Mapping):
        for k in sorted(value, key=str):
            h.update(f"key:{k}".encode())
            _digest_into(h, value[k])
    elif isinstance(value, (list, tuple)):
        h.update(f"seq{len(value)}".encode())
        for v in value:
            _digest_into(h, v)
    else:
        h.update(repr(value).encode())


GPU_DIGITS = 5
"""Significant digits of the output sums that key a measurement on a GPU."""


def _outputs_key(outputs: Mapping[str, Any], device: str) -> Any:
    """The outputs as the key holds them: exact (every byte) on the CPU; on a GPU, whose runs differ in
    the last bits, each output's dtype, shape, and float64 sums of magnitudes and of squares to
    `GPU_DIGITS` (no plain sum: the forces' is about 0, all noise)."""
    if not device.startswith("cuda"):
        return outputs
    summary: dict[str, Any] = {}
    with P.shielded():
        for name, value in outputs.items():
            if not isinstance(value, torch.Tensor):
                summary[name] = value
                continue
            t = P.to(P.detach(value), "cpu", P.float64)
            sums = (P.float_of(P.sum(P.abs(t))), P.float_of(P.sum(P.mul(t, t)))) if P.numel(t) else (0.0, 0.0)
            summary[name] = (str(value.dtype), tuple(value.shape), *(f"{x:.{GPU_DIGITS}g}" for x in sums))
    return summary


def field_key(target: str, device: str, batch_state: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """The key of the field `reference` (the reference run's result) would measure on `batch_state`."""
    h = hashlib.sha256()
    code = Path(__file__).parent
    _digest_into(
        h,
        {
            "target": target,
            "device": device,
            "code": {name: memory.file_stamp(str(code / name)) for name in _MEASUREMENT_CODE},
            "sample": batch_state,
            "weights": reference.get("weights"),
            "wrapper": reference.get("wrapper"),
            "neighbor_cutoffs": reference.get("neighbor_cutoffs"),
            "receptive_cutoff": reference.get("receptive_cutoff"),
            "files": reference.get("model_files"),
            "packages": reference.get("imported_packages"),
            "env_reads": reference.get("env_reads"),
            "file_reads": reference.get("file_reads"),
            "outputs": _outputs_key(reference.get("outputs", {}), device),
        },
    )
    return h.hexdigest()


def field_for(
    pending: PendingField, target: str, device: str, batch_state: Mapping[str, Any], reference: Mapping[str, Any]
) -> dict[str, Any]:
    """The field of the validation of `target` on `device` whose reference run returned `reference` on
    `batch_state` and is measuring in `pending`: remembered (the child's measurement then stopped), else
    collected from the child and remembered when it finished."""
    note_env_reads(target, reference.get("env_reads") or {})  # kept with this validation's first spec
    if not field_cache_enabled():
        return pending.collect()
    key = field_key(target, device, batch_state, reference)
    entries = STORE.load()
    remembered = entries.get(key)
    if isinstance(remembered, dict) and remembered.get("status") != "not_measured":
        pending.abandon()
        STORE.put(key, remembered, entries)  # the most recently used
        return {**remembered, "seconds_total": 0.0, "remembered": True}
    measured = pending.collect()
    if measured.get("status") != "not_measured":
        STORE.put(key, measured)
    return measured
