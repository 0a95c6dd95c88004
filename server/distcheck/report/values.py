"""The report's JSON values: non-finite floats, free-form dicts, and strict readers that name the JSON path.

A non-finite float is written as one of the strings `"NaN"`, `"Infinity"`, `"-Infinity"`. In a free-form
dict (`meta`, `partition_health`, ...) a genuine string that would read back as one of those is written
with one more leading `~`; a dict stored under a `"per_rank"` key may have int rank keys, written as
decimal strings and restored as ints on reading. Every reader raises `ValueError("report $.path: ...")`.
`distcheck.report.codec` builds the records' encoding and decoding on these.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from distcheck.spec import MLIPSpec, SpecError
from distcheck.spec.errors import json_type

_PathT = tuple[str | int, ...]

_NONFINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_ESCAPED_TEXT = re.compile(r"~*(NaN|Infinity|-Infinity)")


def _where(path: _PathT) -> str:
    """A JSON path as shown in errors: `$`, `attempts[1].verdicts.energy`, ..."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _enc_float(x: float) -> float | str:
    """A float as JSON: itself if finite, else `"NaN"`, `"Infinity"` or `"-Infinity"`."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _enc_free(value: Any, path: _PathT, *, int_keys: bool = False) -> Any:
    """A free-form value as JSON (see the module docstring); `int_keys` for a rank-keyed dict."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return "~" + value if _ESCAPED_TEXT.fullmatch(value) else value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _enc_float(float(value))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if int_keys and isinstance(key, numbers.Integral) and not isinstance(key, bool):
                name = str(int(key))
            elif isinstance(key, str):
                name = key
            else:
                what = "int or str" if int_keys else "str"
                raise TypeError(
                    f"report field {_where(path)} has a {type(key).__name__} key {key!r}; keys there must be "
                    f"{what} (only dicts under a 'per_rank' key may use int rank keys)"
                )
            out[name] = _enc_free(item, (*path, name), int_keys=name == "per_rank")
        return out
    if isinstance(value, (list, tuple)):
        return [_enc_free(item, (*path, i)) for i, item in enumerate(value)]
    raise TypeError(
        f"report field {_where(path)} holds a {type(value).__module__}.{type(value).__qualname__}, which "
        "JSON cannot hold; store plain Python values (None, bool, int, float, str, list, dict)"
    )


def _dec_free(value: Any, path: _PathT, *, int_keys: bool = False) -> Any:
    """The inverse of `_enc_free` on parsed JSON."""
    if isinstance(value, str):
        if value in _NONFINITE_TEXT:
            return _NONFINITE_TEXT[value]
        return value[1:] if _ESCAPED_TEXT.fullmatch(value) else value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key: str | int = int(key) if int_keys and _is_decimal(key) else key
            out[new_key] = _dec_free(item, (*path, key), int_keys=key == "per_rank")
        return out
    if isinstance(value, list):
        return [_dec_free(item, (*path, i)) for i, item in enumerate(value)]
    return value


def _is_decimal(key: str) -> bool:
    return re.fullmatch(r"-?(0|[1-9][0-9]*)", key) is not None


def _enc_free_dict(value: Mapping[str, Any] | None, path: _PathT) -> dict[str, Any] | None:
    if value is None:
        return None
    encoded = _enc_free(value, path)
    if not isinstance(encoded, dict):
        raise TypeError(f"report field {_where(path)} must be a dict, got {type(value).__name__}")
    return encoded


_T = TypeVar("_T")


def _bad(path: _PathT, message: str) -> ValueError:
    return ValueError(f"report {_where(path)}: {message}")


def _kind_of(value: object) -> str:
    """What `value` is, for "expected ..., got ..." (`spec.errors.json_type` with an article; an integer
    is a number here, and a tuple, which no reader accepts as an array, is named as the Python type)."""
    if isinstance(value, tuple):
        return f"a Python {type(value).__name__}"
    kind = json_type(value)
    return _KIND_WORDS.get(kind, f"a {kind}")


_KIND_WORDS = {"null": "null", "integer": "a number", "array": "an array", "object": "an object"}


def _fields(
    d: object, path: _PathT, required: Sequence[str], optional: Sequence[str] = (), ignored: Sequence[str] = ()
) -> Mapping[str, Any]:
    """`d` checked to be an object with every `required` key and no key outside the three lists."""
    if not isinstance(d, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(d)}")
    for key in required:
        if key not in d:
            raise _bad((*path, key), "required field is missing")
    allowed = {*required, *optional, *ignored}
    for key in d:
        if key not in allowed:
            raise _bad((*path, str(key)), f"unknown field; allowed fields here are {', '.join(sorted(allowed))}")
    return d


_SCALARS: dict[type, str] = {bool: "true or false", int: "an integer", str: "a string"}
"""The JSON scalars a record field may be (besides a float, `_dec_float`), each with what an error
says was expected."""


def _dec_scalar(value: object, path: _PathT, tp: type[_T]) -> _T:
    """`value` when it is a `tp` (one of `_SCALARS`; a bool is never an int), else the error at `path`."""
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise _bad(path, f"expected {_SCALARS[tp]}, got {_kind_of(value)}")
    return value


def _dec_float(value: object, path: _PathT) -> float:
    if isinstance(value, str) and value in _NONFINITE_TEXT:
        return _NONFINITE_TEXT[value]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _bad(path, f'expected a number (or "NaN", "Infinity", "-Infinity"), got {_kind_of(value)}')
    return float(value)


def _dec_list(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> list[_T]:
    if not isinstance(value, list):
        raise _bad(path, f"expected an array, got {_kind_of(value)}")
    return [item(v, (*path, i)) for i, v in enumerate(value)]


def _dec_str_map(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> dict[str, _T]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    return {str(k): item(v, (*path, str(k))) for k, v in value.items()}


def _dec_rank_map(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> dict[int, _T]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    out: dict[int, _T] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not _is_decimal(k):
            raise _bad((*path, str(k)), 'expected a rank written as a decimal integer key such as "0"')
        out[int(k)] = item(v, (*path, k))
    return out


def _dec_free_dict(value: object, path: _PathT) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    decoded = _dec_free(value, path)
    assert isinstance(decoded, dict)
    return decoded


def _dec_spec(value: object, path: _PathT) -> MLIPSpec:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected a spec object, got {_kind_of(value)}")
    try:
        return MLIPSpec.from_dict(value)
    except SpecError as err:
        raise _bad(path, f"invalid spec: {err}") from err
