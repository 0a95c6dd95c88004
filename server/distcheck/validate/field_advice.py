"""The remedy for a receptive field the wrapper declares too small, in the words every surface uses.

`receptive.py` decides which declaration is wrong (`ReceptiveField.remedy`: the depth or the cutoff,
see its module docstring); `field_remedy` turns that decision into the one sentence that `next_action`,
`trust_action` and the editor's receptive-field diagnostic show. No torch here (`next_action` and the
LSP import it where torch must not be).
"""

from __future__ import annotations

from ..report import ReceptiveField

__all__ = ["field_remedy"]


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def field_remedy(field: ReceptiveField) -> str | None:
    """The exact remedy for an under-declared receptive field, naming the attribute to set on the wrapper
    and its value: `"set num_interactions = N on the wrapper"` when more hops of the declared cutoff
    explain what moved, `"set cutoff = C on the wrapper (...)"` with the reach in Å that a longer cutoff
    explains; None when the declared field covers what was measured (or nothing was)."""
    if not field.under_declared:
        return None
    if field.remedy == "cutoff" and field.suggested_cutoff is not None:
        depth = field.declared_depth or 1
        return (
            f"set cutoff = {field.suggested_cutoff:g} on the wrapper (the model reads atoms up to "
            f"{_num(field.reach_angstrom)} Å away, farther than {depth} interaction(s) of the declared "
            f"{_num(field.cutoff)} Å cutoff reach, and more interactions at {_num(field.cutoff)} Å do not explain "
            "which atoms moved)"
        )
    if field.remedy == "depth" or (field.remedy == "none" and field.measured_depth is not None):
        return f"set num_interactions = {field.measured_depth} on the wrapper"
    return None
