"""The one target type (`Target`) and the references it holds; no torch.

A `Target` is what the CLI builds from its command line, what `[tool.distcheck]` yields, what the
editor daemon lists (`lsp.config.TargetInfo` adds only what the editor shows) and what crosses the
daemon → runner pipe (`to_wire` / `from_wire`, docs/protocol.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..option_check import ConfigError, check_options, normalize

__all__ = [
    "Target",
    "absolute_reference",
    "is_path_reference",
    "sample_reference",
    "split_reference",
    "target_from_reference",
]

_ATTR_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass
class Target:
    """One thing to validate, with references already made absolute where they are paths.

    `factory` and `sample` are as the engine and `load_object` take them (`"/abs/file.py:attr"` or
    `"pkg.mod:attr"`); `sample` may instead be an absolute structure-file path (`sample_is_file`), or
    None to use the factory module's `sample_batch`. `frames` selects frames of a structure file (an index
    or slice as text, see `sample_options`; None: every frame) and `dtype` the precision the sample is read
    at or cast to (`float64` / `float32`; None: float64 for a file, a Python sample as it is). `spec` is
    the prior spec file; `spec_required` says whether a missing file is an error (given with --spec) or
    skipped (from the config). `options` are validator options (checked). `root` is the project
    directory (the pyproject's directory, else the current directory), where the target's code runs,
    and `python_path` the directories to put on `sys.path`. `config` is the pyproject it came from and
    `line` the 1-based line of its table there.
    """

    name: str | None
    factory: str
    sample: str | None = None
    sample_is_file: bool = False
    frames: str | None = None
    dtype: str | None = None
    spec: str | None = None
    spec_required: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    root: str = "."
    python_path: list[str] = field(default_factory=list)
    config: str | None = None
    line: int | None = None

    @property
    def label(self) -> str:
        """The name, or the factory reference."""
        return self.name or self.factory

    def to_wire(self) -> dict[str, Any]:
        """This target as JSON-ready data (every field of `Target`, nothing else): what the daemon sends the runner."""
        return {f.name: _copy(getattr(self, f.name)) for f in fields(Target)}

    @classmethod
    def from_wire(cls, data: Any) -> Target:
        """The target `to_wire` gave; `ConfigError` for anything else (a missing factory, a field of the wrong
        type, an unknown field: the daemon and the runner come from different versions), `OptionError` for
        options out of bounds."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"the runner was sent a target that is not an object: {type(data).__name__}",
                "the daemon and the runner come from different distcheck versions; reinstall distcheck",
            )
        known = {f.name for f in fields(Target)}
        unknown = sorted(str(k) for k in data if k not in known)
        factory = data.get("factory")
        if unknown or not isinstance(factory, str) or not factory:
            what = f"unknown fields {', '.join(unknown)}" if unknown else "no factory"
            raise ConfigError(
                f"the runner was sent a target it cannot read ({what})",
                "the daemon and the runner come from different distcheck versions; reinstall distcheck",
            )
        options = data.get("options") or {}
        check_options(options)
        target = cls(**{k: _copy(v) for k, v in data.items()})
        target.options = {k: normalize(k, v) for k, v in options.items()}
        target.python_path = [str(p) for p in target.python_path or []]
        return target


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def split_reference(text: str) -> tuple[str, str] | None:
    """`(where, attr)` when `text` looks like `where:attr.path`, else None."""
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not _ATTR_PATH.fullmatch(attr):
        return None
    return where, attr


def is_path_reference(where: str) -> bool:
    """Whether the `where` part of a reference is a file path (rather than a dotted module)."""
    return where.endswith(".py") or "/" in where or os.sep in where


def absolute_reference(text: str, base: str, what: str) -> str:
    """`text` (`file.py:attr` or `pkg.mod:attr`) with a file path made absolute against `base`."""
    parts = split_reference(text)
    if parts is None:
        raise ConfigError(
            f"{what} {text!r} is not a reference",
            "write it as 'path/file.py:function' or 'package.module:function'",
        )
    where, attr = parts
    if is_path_reference(where):
        where = os.path.normpath(os.path.join(base, os.path.expanduser(where)))
    return f"{where}:{attr}"


def target_from_reference(text: str, base: str) -> Target | None:
    """A target for a factory reference or a `.py` file given on the command line, else None."""
    if split_reference(text) is not None:
        return Target(name=None, factory=absolute_reference(text, base, "factory"), root=base)
    if text.endswith(".py"):
        path = os.path.normpath(os.path.join(base, os.path.expanduser(text)))
        if not os.path.isfile(path):
            raise ConfigError(f"factory file {path} does not exist", "check the path of TARGET")
        return Target(name=None, factory=f"{path}:model_factory", root=base)
    return None


def sample_reference(text: str, base: str) -> tuple[str, bool]:
    """`(reference, is_structure_file)` for a `--sample` / `sample =` value."""
    candidate = os.path.normpath(os.path.join(base, os.path.expanduser(text)))
    if os.path.isfile(candidate) and not candidate.endswith(".py"):
        return candidate, True
    if split_reference(text) is not None:
        return absolute_reference(text, base, "sample"), False
    if text.endswith(".py"):
        if not os.path.isfile(candidate):
            raise ConfigError(f"sample file {candidate} does not exist", "check the path of the sample")
        return f"{candidate}:sample_batch", False
    raise ConfigError(
        f"sample {text!r} is neither an existing structure file ({candidate} not found) nor a reference",
        "give a structure file ASE can read (.xyz, .extxyz, .cif, ...), 'path/file.py:sample_batch' or "
        "'package.module:attr'",
    )
