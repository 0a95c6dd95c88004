"""A model whose first attempt fails under the spec it declares (the halo-unaware MPNN under
`halo_correction`) and that auto-fix repairs; a rank that runs a second forward in the same process (a
resident rank serving a later run of the validation) writes marker `resident-<rank>` and blocks."""

from __future__ import annotations

import os
import time
from typing import Any

from faultkit import marker, where

from examples.common import spec_copy
from examples.unaware_model import WRONG_SPEC, HaloUnawareMPNN, sample_batch

__all__ = ["model_factory", "sample_batch"]


class BlockingWhenResident(HaloUnawareMPNN):
    def __init__(self) -> None:
        super().__init__()
        self.distribution_spec = spec_copy(WRONG_SPEC)

    def forward(self, batch: Any) -> Any:
        rank = where()
        if rank.isdigit():
            path = os.path.join(os.environ["FAULT_MARKER_DIR"], f"forwards-{os.getpid()}")
            seen = int(open(path).read()) if os.path.exists(path) else 0
            with open(path, "w") as fh:
                fh.write(str(seen + 1))
            if seen:
                marker(f"resident-{rank}")
                time.sleep(300)
        return super().forward(batch)


def model_factory() -> BlockingWhenResident:
    return BlockingWhenResident()
