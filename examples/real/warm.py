"""Import the real models' third-party packages once, ignoring any that are missing or broken.

Meant for a process that starts many others by forking, such as distcheck's forkserver warm pool
(`tests/server/real/conftest.py` adds this module to its preload list): `aimnet.models` alone costs
about 7 s of CPU per process on a 2-core machine (warp kernel definitions in nvalchemi-toolkit-ops),
which every reference and rank process would otherwise pay again. The wrapper modules themselves
(`examples.real.aimnet2`, ...) are not imported here, so each rank still imports them afresh.
"""

from __future__ import annotations

import importlib

__all__ = ["PACKAGES", "loaded"]

#: What each wrapper imports that is slow to import (`mace` before `e3nn`: see `examples.real.mace_model`).
PACKAGES: tuple[str, ...] = ("aimnet.models", "aimnet.modules", "aimnet.nbops", "mace.modules", "torch_geometric.nn")

#: The packages of `PACKAGES` that imported.
loaded: list[str] = []

for _name in PACKAGES:
    try:
        importlib.import_module(_name)
    except Exception:  # a missing or broken package is the wrapper's business, not the warm pool's
        continue
    loaded.append(_name)
