"""What a validation may run: workspace trust, and code that lives outside the workspace.

A validation imports the target's factory and sample modules and runs them. The daemon therefore
refuses to validate until the client has said the workspace is trusted (`initializationOptions`
`{"trusted": true}` or the `distcheck/trust` notification), and refuses a target whose code would be
imported from outside the workspace folders and the interpreter's installed packages until the user
has confirmed those paths (`{"confirmOutsideWorkspace": [paths]}` in `distcheck.validate`'s
arguments). Nothing here imports user code: paths come from `TargetInfo` and text scans.
"""

from __future__ import annotations

import os
import site
import sysconfig
from collections.abc import Iterable, Sequence

from .config import TargetInfo, reference_file

__all__ = ["OUTSIDE_WORKSPACE", "UNTRUSTED", "code_outside", "installed_dirs", "is_within"]

UNTRUSTED = (
    "this workspace is not trusted, and validating imports and runs its model and sample code; "
    "trust the workspace (Manage Workspace Trust) to validate"
)
OUTSIDE_WORKSPACE = "outside-workspace"


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def is_within(path: str, dirs: Iterable[str]) -> bool:
    """True when `path` (symlinks resolved) is one of `dirs` or lies below one of them."""
    real = _real(path)
    for directory in dirs:
        base = _real(directory)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def installed_dirs() -> list[str]:
    """The interpreter's installed-package and standard-library directories (code the user installed,
    not code a workspace brought along)."""
    found = {sysconfig.get_path(key) for key in ("purelib", "platlib", "stdlib", "platstdlib")}
    try:
        found.update(site.getsitepackages())
    except AttributeError:  # some virtualenv builds of site lack it
        pass
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user:
        found.add(user)
    return sorted(d for d in found if d)


def code_outside(target: TargetInfo, roots: Sequence[str], confirmed: Iterable[str] = ()) -> list[str]:
    """The factory's and the sample's source files when they lie outside `roots` (the workspace
    folders) and the installed packages and the user has not confirmed them. What those modules
    import in turn is theirs to choose; a module the search directories do not hold would come from
    the installed packages."""
    allowed = [*roots, *installed_dirs()]
    confirmed_real = {_real(p) for p in confirmed}
    references = [target.factory]
    if target.sample and not target.sample_is_file:
        references.append(target.sample)
    out: list[str] = []
    for reference in references:
        path = reference_file(reference, target.search_dirs)
        if path is None:
            continue
        path = os.path.abspath(os.path.join(target.root, path))
        if path not in out and not is_within(path, allowed) and _real(path) not in confirmed_real:
            out.append(path)
    return out
