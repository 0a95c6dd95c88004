"""The factory and the sample of a job (a CLI or editor-runner validation), imported in this process.

A structure-file sample is read with ASE: the frames `Target.frames` selects (default every frame),
each one system of a multi-system batch, at `Target.dtype` (default float64; see `sample_options`).
A Python sample (a callable or a batch object) is called and, when `dtype` is set, cast to it. When a
validation then fails on a float32/float64 mismatch, `add_dtype_hint` names the `dtype` that fixes it.
Hints name what the caller can change, in its `Vocabulary` (`--dtype` for the CLI, the pyproject target's
`dtype =` for the editor).

The user's sample function runs as in a fresh process (with whatever its module set up); distcheck's
own handling of what it returns (the conversion to a `Batch`, the cast) runs inside
`runtime.pristine.shielded()`, out of reach of a torch-function mode or global module hook the user's
code left behind. In the editor's runner no other target's code ever ran in the same process
(`jobs.runner`: one target per runner).
"""

from __future__ import annotations

import inspect
import os
import re
from typing import TYPE_CHECKING, Any

from ..option_check import ConfigError
from ..options import CLI, Vocabulary
from ..runtime.source import definition_site
from ..sample_options import DTYPES, check_dtype, parse_frames
from .target import Target

if TYPE_CHECKING:
    from ..batch import Batch
    from ..report import TraceReport

__all__ = ["add_dtype_hint", "import_object", "is_dtype_mismatch", "load_sample", "source_of", "where_raised"]


def where_raised(exc: BaseException) -> str:
    """`" (at file:line in function)"` for the user frame of `exc` (`runtime.frames`: a SyntaxError's
    own line, else the innermost frame in the user's code), or ""."""
    from ..runtime.frames import user_frame_of

    f = user_frame_of(exc)
    return "" if f is None else f" (at {f.file}:{f.line} in {f.function})"


def import_object(reference: str, what: str) -> Any:
    """Import `reference` (`file.py:attr` or `pkg.mod:attr`); any failure is a `ConfigError` saying
    where it was raised and what to do (`what` names the object in the message: "factory", "sample")."""
    from ..runtime.factory import FactoryError, load_object

    try:
        return load_object(reference)
    except FactoryError as err:
        raise ConfigError(f"{what}: {err}", "check the reference, the working directory and python_path") from err
    except Exception as exc:
        hint = "fix the error in that module (it is imported the same way in every rank)"
        if isinstance(exc, ModuleNotFoundError):
            hint = (
                f"{exc.name or 'that module'} is not importable here: install it, run from the project root, "
                "or list the directory that holds it in python_path under [tool.distcheck]"
            )
        raise ConfigError(
            f"importing the {what} {reference!r} raised {type(exc).__name__}: {exc}{where_raised(exc)}", hint
        ) from exc


def _dtype(target: Target, words: Vocabulary) -> Any:
    import torch

    if target.dtype is None:
        return None
    try:
        name = check_dtype(target.dtype)
    except ValueError as exc:
        raise ConfigError(
            str(exc), f"use {words.assign('dtype', DTYPES[0])} (the default) or {words.assign('dtype', DTYPES[1])}"
        ) from exc
    return torch.float32 if name == "float32" else torch.float64


def _ase_frames(path: str, words: Vocabulary) -> list[Any]:
    import ase.io

    if not os.path.isfile(path):
        raise ConfigError(
            f"the sample structure file {path} does not exist", f"check the path given to {words.name('sample')}"
        )
    try:
        frames = ase.io.read(path, index=":")
    except Exception as exc:  # ASE raises many unrelated types for unreadable files
        raise ConfigError(
            f"cannot read the sample structure file {path}: ASE raised {type(exc).__name__}: {exc}",
            "give a structure file that ASE can read (.xyz, .extxyz, .cif, ...), or check its format",
        ) from exc
    return list(frames) if isinstance(frames, list) else [frames]


def read_structure(path: str, frames: Any, dtype: Any, words: Vocabulary = CLI) -> tuple[Batch, dict[str, Any]]:
    """The frames `frames` selects (None: every frame) of the structure file `path`, one system each,
    at `dtype` (a torch dtype; None: float64), and what was read (`file`, and `frames`,
    `frame_indices`, `dtype` when given); `ConfigError` for an unreadable file or a selection that is
    not an index or slice, out of range or empty (its hint in `words`)."""
    import torch

    from ..batch import Batch

    try:
        selection = None if frames is None else parse_frames(frames)
    except ValueError as exc:
        raise ConfigError(str(exc), f"fix {words.name('frames')} (e.g. {words.assign('frames', '0:4')})") from exc
    everything = _ase_frames(path, words)
    info: dict[str, Any] = {"file": path}
    picked = list(range(len(everything)))
    if selection is not None:
        try:
            picked = selection.pick(len(everything), path)
        except ValueError as exc:
            raise ConfigError(
                str(exc),
                f"choose frames the file has (e.g. {words.assign('frames', '0')} for the first, "
                f"{words.assign('frames', '0:4')} for four)",
            ) from exc
        info["frames"] = selection.text
        info["frame_indices"] = picked
    if dtype is not None:
        info["dtype"] = str(dtype).removeprefix("torch.")
    try:
        batch = Batch.from_ase([everything[i] for i in picked], dtype=dtype or torch.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot use the sample structure file {path}: {exc}", "check the file's content") from exc
    return batch, info


def load_sample(target: Target, factory: Any, words: Vocabulary = CLI) -> tuple[Batch, dict[str, Any]]:
    """The sample batch of `target` and where it came from; `factory` is the loaded factory (its module's
    `sample_batch` is the default sample). `ConfigError` for a sample that cannot be read, called or
    used as a batch, and for `frames` with a sample that is not a structure file (hints in `words`)."""
    from ..batch import as_batch

    dtype = _dtype(target, words)
    if target.sample_is_file:
        assert target.sample is not None
        return read_structure(target.sample, target.frames, dtype, words)
    reference = target.sample
    if reference is None:
        module_ref = target.factory.rpartition(":")[0]
        if not hasattr(inspect.getmodule(factory), "sample_batch"):
            raise ConfigError(
                f"no sample for {target.label}: {module_ref} defines no sample_batch",
                f"give it {words.assign('sample', 'path/file.py:sample_batch')} (or a structure file), "
                "or define sample_batch() next to the factory",
            )
        reference = f"{module_ref}:sample_batch"
    if target.frames is not None:
        raise ConfigError(
            f"frames {target.frames!r} selects frames of a structure file, but the sample is {reference!r}, "
            "a Python reference",
            f"give {words.name('sample')} a structure file (.xyz, .extxyz, .traj, ...), or remove "
            f"{words.name('frames')}",
        )
    source = import_object(reference, "sample")
    obj = source
    if callable(source) and not isinstance(source, type):
        try:
            obj = source()
        except Exception as exc:
            raise ConfigError(
                f"calling the sample {reference!r} raised {type(exc).__name__}: {exc}{where_raised(exc)}",
                "fix the sample function (it is called with no arguments)",
            ) from exc
    from ..runtime.pristine import shielded

    try:
        with shielded():
            batch = as_batch(obj)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"the sample {reference!r} is not a batch: {exc}",
            "return a distcheck.batch.Batch, an ase.Atoms or a list of them",
        ) from exc
    info = source_of(source, reference)
    if dtype is not None:
        with shielded():
            batch = batch.to(dtype=dtype)
        info["dtype"] = str(dtype).removeprefix("torch.")
    return batch, info


def source_of(obj: Any, reference: str) -> dict[str, Any]:
    """`{"reference", "qualname"}` of an imported object, with the `file` and `line` it is defined at when
    its source can be found."""
    info: dict[str, Any] = {"reference": reference, "qualname": reference.rpartition(":")[2]}
    site = definition_site(obj)
    if site is not None:
        info["file"], info["line"] = site
    return info


# --------------------------------------------------------------------------------------------------
# float32 / float64 mismatches

_SINGLE = re.compile(r"\b(float|float32|floattensor|torch\.float32)\b", re.IGNORECASE)
_DOUBLE = re.compile(r"\b(double|float64|doubletensor|torch\.float64)\b", re.IGNORECASE)
_TYPE_WORDS = re.compile(r"dtype|scalar type|same type|should be the same|expected|found", re.IGNORECASE)


def is_dtype_mismatch(message: str) -> bool:
    """Whether an error message is torch's complaint about float32 meeting float64 in one operation
    (`self (Float) and source (Double) must have the same scalar type`, `mat1 and mat2 must have the same
    dtype, but got Double and Float`, `expected scalar type Float but found Double`, ...)."""
    return bool(_SINGLE.search(message) and _DOUBLE.search(message) and _TYPE_WORDS.search(message))


def add_dtype_hint(
    report: TraceReport, batch: Batch, sample_info: dict[str, Any], words: Vocabulary = CLI
) -> str | None:
    """When a run of `report` failed on a float32/float64 mismatch, put what to do about the sample's
    dtype (in `words`) on the second line of `report.next_action` and return it (else None): the sample
    `batch` is float64 (read from a file, or given so) and the model may compute in float32, or the other
    way round."""
    messages = [a.error.message for a in report.attempts if a.error is not None]
    if not any(is_dtype_mismatch(m) for m in messages):
        return None
    have = str(batch.dtype).removeprefix("torch.")
    other = "float32" if have == "float64" else "float64"
    if "reference" in sample_info:  # a Python sample (its "file" is where it is defined)
        where = f"as {sample_info.get('qualname') or 'the sample'} gave it"
    else:
        where = f"read from {os.path.basename(str(sample_info.get('file', 'the file')))}"
    hint = (
        f"what to do: the run mixed float32 and float64, and the sample is {have} ({where}); if the model "
        f"computes in {other}, validate with {words.assign('dtype', other)}, "
        f"or make the model cast its inputs to its own dtype"
    )
    head, _, rest = report.next_action.partition("\n")
    report.next_action = "\n".join(x for x in (head, hint, rest) if x)
    return hint
