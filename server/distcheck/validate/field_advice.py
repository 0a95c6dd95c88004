"""The remedy for a receptive field the wrapper declares too small, in the words every surface uses.

`receptive.py` decides which declaration is wrong (`ReceptiveField.remedy`: the depth or the cutoff,
see its module docstring); `field_remedy` turns that decision into the one sentence that `next_action`,
`trust_action` and the editor's receptive-field diagnostic show. The text is written next to the
record (`report.checks.receptive_remedy`), so the torch-free editor daemon reads the same words
without importing this package.
"""

from __future__ import annotations

from ..report import ReceptiveField
from ..report.checks import receptive_remedy

__all__ = ["field_remedy"]


def field_remedy(field: ReceptiveField) -> str | None:
    """The exact remedy for an under-declared receptive field, naming the attribute to set on the wrapper
    and its value: `"set num_interactions = N on the wrapper"` when more hops of the declared cutoff
    explain what moved, `"set cutoff = C on the wrapper (...)"` with the reach in Å that a longer cutoff
    explains; None when the declared field covers what was measured (or nothing was)."""
    return receptive_remedy(field)
