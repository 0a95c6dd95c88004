"""Receptive-field measurements remembered for the next validation of the same model on the same sample.

The measurement (`receptive.measure_receptive_field`) costs three more forwards of the sample and the
graph work, which at 100k atoms is the longest step a validation waits for once its ranks have run.
Validating one target again and again with only the spec changed (a quick fix applied, auto-fix, a
re-validation on save of the spec file) measures the same thing each time. So a measurement is
stored under a key of everything it depends on, and a validation whose key is stored takes it from
there and stops the reference child's own measurement:

- the target (the factory as written), the device, the environment (interpreter, Python and torch
  versions, the site directories' mtimes, which change when a package is installed or removed) and
  the measurement's own code;
- the sample: every tensor of its state, byte for byte;
- the model: the fingerprint of its weights (`model_identity`), what the wrapper declares, the
  neighbour cutoffs its forward asked for, and the file (mtime and size) of every module of the user's
  own (not installed, not the standard library) the reference child imported to build and run it;
- its answers: every reference output, rounded to about six significant digits of its largest value
  (so run-to-run noise on a GPU rarely changes the key, and a change of the model that the files and
  weights do not show, such as a setting read from a data file, almost always does).

A measurement that did not finish is never stored. A remembered one is the stored dict with
`"remembered": True` (the report's record is the same either way, so two validations of one model
give the same report). The file is
`<cache>/distcheck/receptive-fields.json` (the newest `MAX_ENTRIES`); DISTCHECK_FIELD_CACHE=0 turns
this off. Best effort: an unreadable or unwritable cache only means the field is measured.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import torch

from ..cache_home import cache_dir
from ..processes.spares.learned import fingerprint
from ..processes.spares.settings import field_cache_enabled
from ..runtime import pristine as P
from ..runtime.frames import is_user_file
from ..runtime.module_namespace import module_file
from .reference_field import PendingField

__all__ = ["MAX_ENTRIES", "field_for", "field_key", "module_files"]

MAX_ENTRIES = 64

_MEASUREMENT_CODE = ("receptive.py", "receptive_graph.py", "reference_field.py", "field_cache.py")


def _path() -> Path:
    return Path(cache_dir()) / "receptive-fields.json"


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def module_files(names: Iterable[str]) -> dict[str, list[int] | None]:
    """The file of each of the user's own modules in `names` (`frames.is_user_file`: not installed,
    not the standard library, torch or distcheck), with its mtime (ns) and size. Installed packages are
    stamped as one, by the environment's fingerprint, not file by file: which of them a process imports
    anew depends on what its spare imported ahead. Called in the reference child with the modules it
    imported to build and run the model."""
    found: dict[str, list[int] | None] = {}
    for name in names:
        path = module_file(sys.modules.get(name))
        if path is not None and is_user_file(path):
            found.setdefault(path, _stamp(path))
    return dict(sorted(found.items()))


def _digest_into(h: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        h.update(f"tensor{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
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


def _rounded(outputs: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Each output as its largest magnitude to six significant digits and its values on a grid of
    2**-20 of that: noise at round-off moves neither."""
    rounded: dict[str, Any] = {}
    for name, value in outputs.items():
        with P.shielded():  # never through a torch function the user's module replaced here (`pristine`)
            t = P.to(P.detach(value), "cpu", P.float64)
            scale = P.float_of(P.amax(P.abs(t))) if P.numel(t) else 0.0
            grid = P.to(P.round(P.mul(P.div(t, scale), 2**20)), P.int64) if scale > 0 else t
        rounded[name] = (f"{scale:.6e}", grid)
    return rounded


def field_key(target: str, device: str, batch_state: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """The key of the field `reference` (the reference run's result) would measure on `batch_state`."""
    h = hashlib.sha256()
    code = Path(__file__).parent
    _digest_into(
        h,
        {
            "target": target,
            "device": device,
            "environment": fingerprint(),  # interpreter, Python, torch, a package installed or removed
            "code": {name: _stamp(str(code / name)) for name in _MEASUREMENT_CODE},
            "sample": batch_state,
            "weights": reference.get("weights"),
            "wrapper": reference.get("wrapper"),
            "neighbor_cutoffs": reference.get("neighbor_cutoffs"),
            "receptive_cutoff": reference.get("receptive_cutoff"),
            "files": reference.get("model_files"),
            "outputs": _rounded(reference.get("outputs", {})),
        },
    )
    return h.hexdigest()


def _read() -> dict[str, Any]:
    try:
        data = orjson.loads(_path().read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(data: dict[str, Any]) -> None:
    path = _path()
    with contextlib.suppress(OSError, TypeError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".receptive-fields.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(orjson.dumps(data))
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def field_for(
    pending: PendingField, target: str, device: str, batch_state: Mapping[str, Any], reference: Mapping[str, Any]
) -> dict[str, Any]:
    """The field of the validation of `target` on `device` whose reference run returned `reference` on
    `batch_state` and is measuring in `pending`: remembered (the child's measurement then stopped), else
    collected from the child and remembered when it finished."""
    if not field_cache_enabled():
        return pending.collect()
    key = field_key(target, device, batch_state, reference)
    entries = _read()
    remembered = entries.get(key)
    if isinstance(remembered, dict) and remembered.get("status") != "not_measured":
        pending.abandon()
        return {**remembered, "seconds_total": 0.0, "remembered": True}
    measured = pending.collect()
    if measured.get("status") != "not_measured":
        entries.pop(key, None)
        entries[key] = measured
        _write(dict(list(entries.items())[-MAX_ENTRIES:]))
    return measured
