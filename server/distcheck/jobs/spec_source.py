"""The one rule that says which spec a validation starts from, and where a fix of it is saved. No torch,
no user code: the CLI, the editor's runner and the daemon (quick fixes, fix-all, the Testing view's
targets) all call `spec_source`, the library's job (`jobs.run.run_job`) records its answer in the
report (`report.target.spec_path` / `spec_rule`).

The first of these that applies names the spec file (`SpecSource.rule`):

1. `explicit`: the file given for this run (`distcheck validate --spec PATH`); missing, it is an error.
2. `pyproject`: the target's `spec = "..."` in `[tool.distcheck]` (relative to the pyproject); missing,
   the validation starts from the wrapper's own spec and a fix is saved there.
3. `beside-model`: `<model>.distspec.json` beside the model file (the factory's file: `path/model.py`, or
   the module a `package.module:factory` reference names, found on the target's search path without
   importing it), when that file exists.
4. `wrapper`: none of those: the wrapper's own `distribution_spec` attribute (or what distcheck infers).
   A fix is saved to the file rule 2 names when there is one, else beside the model, where rule 3 reads
   it next time.

So the file a fix is written to (`SpecSource.path`) is always the one the next run reads.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .target import Target, is_path_reference, split_reference

__all__ = [
    "SPEC_RULES",
    "SpecSource",
    "beside_model_path",
    "model_file",
    "resolve_module",
    "spec_file_path",
    "spec_source",
]

SPEC_RULES: tuple[str, ...] = ("explicit", "pyproject", "beside-model", "wrapper")
"""`SpecSource.rule` values, in the order the rule tries them."""

SPEC_SUFFIX = ".distspec.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class SpecSource:
    """Which spec a validation starts from: `rule` (one of `SPEC_RULES`) and `path`, the spec file the
    rule names: the file read (rules `explicit`, `pyproject`, `beside-model`), and the file a fix is
    saved to. With rule `wrapper` nothing is read and `path` is where a fix would be saved (None when
    the model's file cannot be found and no `spec` is configured)."""

    rule: str
    path: str | None

    @property
    def reads_file(self) -> bool:
        """Whether the validation starts from the file at `path` (else from the wrapper's own spec)."""
        return self.rule != "wrapper" and self.path is not None


def resolve_module(module: str, search_dirs: Iterable[str]) -> str | None:
    """The file of the dotted `module` under the first of `search_dirs` that has it
    (`a/b/c.py` or `a/b/c/__init__.py`), or None; nothing is imported."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for directory in search_dirs:
        base = os.path.join(directory, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return os.path.abspath(candidate)
    return None


def model_file(factory: str, search_dirs: Sequence[str]) -> str | None:
    """The source file of the `factory` reference (`/abs/model.py:attr` or `package.module:attr`): a path
    as it is, a module found under `search_dirs`, then on `sys.path`; None when neither has it."""
    parts = split_reference(factory)
    if parts is None:
        return None
    where = parts[0]
    if is_path_reference(where):
        return os.path.abspath(where)
    return resolve_module(where, [*search_dirs, *(p for p in sys.path if p and os.path.isdir(p))])


def spec_file_path(directory: str, stem: str) -> str:
    """`<directory>/<stem>.distspec.json` with characters unsafe in a file name replaced by `_`."""
    return os.path.join(directory, _UNSAFE.sub("_", stem).strip("._") + SPEC_SUFFIX)


def beside_model_path(model: str) -> str:
    """`<model>.distspec.json` beside the model file `model` (`spec_file_path` of its directory and stem;
    a package's `__init__.py` is named after the package)."""
    stem = os.path.splitext(os.path.basename(model))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(model))
    return spec_file_path(os.path.dirname(model), stem)


def spec_source(
    target: Target,
    *,
    explicit: str | None = None,
    exists: Callable[[str], bool] = os.path.isfile,
    factory_file: str | None = None,
) -> SpecSource:
    """The rule (module docstring) for `target`: `explicit` is the spec given for this run (else the
    target's own when `target.spec_required`: the CLI's `--spec`), `target.spec` without
    `spec_required` the configured one; `exists` says whether a file exists (the daemon passes one that
    sees open buffers); `factory_file` is the model file when the caller already knows it (else found
    with `model_file` on the target's `python_path` and `root`)."""
    given = explicit if explicit is not None else (target.spec if target.spec_required else None)
    if given is not None:
        return SpecSource("explicit", os.path.abspath(given))
    configured = None if target.spec_required else target.spec
    if configured is not None:
        path = os.path.abspath(configured)
        return SpecSource("pyproject" if exists(path) else "wrapper", path)
    model = factory_file or model_file(target.factory, [*target.python_path, target.root])
    beside = beside_model_path(model) if model is not None else None
    if beside is not None and exists(beside):
        return SpecSource("beside-model", beside)
    return SpecSource("wrapper", beside)
