"""How a structure-file sample is read: which frames (`frames`) and at which precision (`dtype`).

No torch here: `targets` checks these keys of a `[tool.distcheck]` target (on their line, for the
editor's diagnostics) with the same functions the CLI uses for `--frames` / `--dtype`.

`frames` is a Python index or slice over the file's frames: `"2"` (one frame), `"-1"` (the last),
`"0:10"`, `"::2"`, `"5:"`. Every selected frame becomes one system of a multi-system batch. The default
is every frame. `dtype` is `float64` (the default) or `float32`: the floating dtype of positions,
cells and charges read from the file, or that a Python sample is cast to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DTYPES",
    "SAMPLE_KEYS",
    "FrameSelection",
    "check_dtype",
    "parse_frames",
]

SAMPLE_KEYS: Mapping[str, str] = {
    "frames": "an index or slice of frames: 2, -1, 0:10, ::2",
    "dtype": "float64 or float32",
}
"""The sample-reading keys a target (CLI flag `--<key>`, pyproject target key) may set, with their values in words."""
DTYPES = ("float64", "float32")
"""The floating dtypes a sample can be read at; the first is the default."""

_INDEX = r"[+-]?\d+"
_FRAMES = re.compile(rf"(?P<index>{_INDEX})|(?P<start>{_INDEX})?:(?P<stop>{_INDEX})?(:(?P<step>{_INDEX})?)?")
_FRAMES_HINT = "write frames as an index (2, -1) or a slice start:stop:step (0:10, ::2, 5:)"


@dataclass(frozen=True)
class FrameSelection:
    """Which frames of a structure file to read: one `index` or a `window` (a Python slice); `text` as given."""

    text: str
    index: int | None = None
    window: slice | None = None

    def pick(self, count: int, path: str) -> list[int]:
        """The frame indices selected out of `count` frames of `path`, in order; `ValueError` (saying how
        many frames the file has) when an index is out of range or the slice selects no frame."""
        frames = f"{count} frame" if count == 1 else f"{count} frames"
        if self.index is not None:
            if not -count <= self.index < count:
                valid = "index 0" if count == 1 else f"indices 0 to {count - 1}, or -1 for the last"
                raise ValueError(f"frames {self.text!r} is out of range: {path} has {frames} ({valid})")
            return [self.index % count]
        assert self.window is not None
        picked = list(range(count))[self.window]
        if not picked:
            raise ValueError(f"frames {self.text!r} selects no frame: {path} has {frames}")
        return picked


def parse_frames(value: Any) -> FrameSelection:
    """A `FrameSelection` for `value`: an int, or a string holding an index or `start:stop:step` slice.

    Raises `ValueError` (with how to write it) for anything else: a bool, a float, a step of 0, text.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"frames must be an index or a slice, got {value!r}; {_FRAMES_HINT}")
    if isinstance(value, int):
        return FrameSelection(str(value), index=value)
    text = value.strip()
    match = _FRAMES.fullmatch(text.replace(" ", ""))
    if match is None:
        raise ValueError(f"frames {value!r} is neither an index nor a slice; {_FRAMES_HINT}")
    if match.group("index") is not None:
        return FrameSelection(text, index=int(match.group("index")))
    start, stop, step = (None if match.group(g) is None else int(match.group(g)) for g in ("start", "stop", "step"))
    if step == 0:
        raise ValueError(f"frames {value!r} has a step of 0; {_FRAMES_HINT}")
    return FrameSelection(text, window=slice(start, stop, step))


def check_dtype(value: Any) -> str:
    """`value` when it is one of `DTYPES`, else `ValueError` naming the valid ones."""
    if value not in DTYPES:
        raise ValueError(f"dtype must be float64 or float32, got {value!r}")
    return str(value)
