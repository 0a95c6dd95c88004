"""`runtime.source.definition_site`: the one rule for where a factory, sample or helper is defined."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from distcheck.jobs.sample import source_of
from distcheck.runtime.source import definition_site


def _plain() -> int:
    return 1


def _decorator(fn: Any) -> Any:
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return inner


@_decorator
def _wrapped() -> int:
    return 2


class _Klass:
    pass


def _line_of(needle: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if line.startswith(needle))


def test_functions_classes_and_decorated_functions_are_found_at_their_definition() -> None:
    here = os.path.abspath(__file__)
    assert definition_site(_plain) == (here, _line_of("def _plain"))
    assert definition_site(_Klass) == (here, _line_of("class _Klass"))
    # unwrapped: the decorated function's own source, not the decorator's inner function
    site = definition_site(_wrapped)
    assert site is not None and site[0] == here and site[1] in (_line_of("@_decorator"), _line_of("def _wrapped"))


def test_objects_without_source_have_no_site() -> None:
    for obj in (len, json.loads.__call__, 5, "text", None, os.sep):
        assert definition_site(obj) is None, obj


def test_the_job_layer_reports_the_same_site() -> None:
    info = source_of(_plain, "mod.py:_plain")
    assert info == {
        "reference": "mod.py:_plain",
        "qualname": "_plain",
        "file": os.path.abspath(__file__),
        "line": _line_of("def _plain"),
    }
    assert source_of(len, "builtins:len") == {"reference": "builtins:len", "qualname": "len"}
