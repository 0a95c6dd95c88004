"""Every report record reads as a read-only mapping of its JSON keys (issue 32, item 7).

The record classes are enumerated from the package (every `Record` subclass of every module of
`distcheck.report`), and for each an instance is synthesised from its fields' types in three shapes:
every field set, only the required ones (so fields written only when set are absent), and, for an
open part, with keys it does not name. On each: `keys()` is `to_dict()`'s key list, `record[key]` is
the typed value whose encoding is `to_dict()[key]` (a nested record stays a record), `get` / `in` /
`values` / `items` / `dict(record)` agree, writes and deletes raise `TypeError` naming what to set,
and the record stays truthy, not iterable, not a `Mapping` and unequal to its dict. Then the
dict-style reads of code written for nvalchemi's `TraceReport` run on the checked-in report fixtures.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import distcheck.report as report_pkg
from distcheck.report import TraceReport
from distcheck.report.codec import Record, derived_type, encode, is_record, slots
from distcheck.report.values import _enc_free
from distcheck.spec import MLIPSpec
from distcheck.spec.fields import non_null, union_args

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = sorted((ROOT / "tests" / "extension" / "fixtures").glob("*.json"))
MAPPING_METHODS = ("keys", "values", "items", "get")


def record_classes() -> list[type[Record]]:
    """Every dataclass deriving from `Record` in every module of `distcheck.report`."""
    for info in pkgutil.iter_modules(report_pkg.__path__):
        if info.name != "__main__":
            importlib.import_module(f"distcheck.report.{info.name}")
    found: list[type[Record]] = []
    todo = list(Record.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if is_record(cls) and cls.__module__.startswith("distcheck.report") and not cls.__name__.startswith("_"):
            found.append(cls)
    return sorted(set(found), key=lambda c: (c.__module__, c.__name__))


CLASSES = record_classes()


# --------------------------------------------------------------------------------------------------
# synthesised instances


def _sample(tp: Any, depth: int) -> Any:
    """A non-empty value of the codec type `tp`."""
    if tp is Any:
        return {"a": 1.5}
    args = union_args(tp)
    if args is not None:
        return _sample(non_null(args), depth)
    if tp is bool:
        return True
    if tp is int:
        return 0  # also a valid position (TraceReport.best_index of one attempt)
    if tp is float:
        return 0.5
    if tp is str:
        return "text"
    if tp is MLIPSpec:
        return MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1, "output_kinds": {"energy": "per_graph"}})
    if is_record(tp):
        return _build(tp, depth + 1, full=depth < 3)
    origin, targs = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return [_sample(targs[0], depth)]
    if origin is dict:
        if targs[1] is Any:
            return {"a": 1.5, "per_rank": {0: 1}}
        key: Any = 0 if targs[0] is int else "k"
        return {key: _sample(targs[1], depth)}
    raise AssertionError(f"no sample for {tp!r}")


def _build(cls: type[Record], depth: int = 0, *, full: bool = True) -> Any:
    kwargs: dict[str, Any] = {}
    for s in slots(cls):
        if s.enum is not None:
            kwargs[s.name] = s.enum[0]
        elif s.required or full:
            kwargs[s.name] = _sample(s.tp, depth)
    return cls(**kwargs)


def _is_open(cls: type[Record]) -> bool:
    return any(f.metadata.get("extra") for f in dataclasses.fields(cls))


def _build_with(cls: type[Record], **more: Any) -> Record:
    base = _build(cls)
    return dataclasses.replace(base, **more)


def _cases() -> list[Any]:
    out = []
    for cls in CLASSES:
        for shape in ["full", "bare", *(["extra", "wrong type"] if _is_open(cls) else [])]:
            out.append(pytest.param(cls, shape, id=f"{cls.__name__}-{shape}"))
    return out


def _instance(cls: type[Record], shape: str) -> Record:
    if shape == "full":
        return _build(cls)
    if shape == "bare":
        return _build(cls, full=False)
    if shape == "extra":
        return _build_with(cls, extra={"unnamed": [1, 2], "per_rank": {0: {"x": 1.0}}})
    first = slots(cls)[0]
    wrong = "text" if first.tp is not str else 5
    return cls.from_dict({first.key: wrong, "unnamed": True})


def _wire_type(record: Record, key: str) -> Any:
    """The codec type of the value behind `key` (None for an open part's unnamed key)."""
    extra = getattr(record, "extra", {})
    if key in extra:
        return None
    for s in slots(type(record)):
        if s.key == key:
            return s.tp
    return derived_type(type(record), key)


# --------------------------------------------------------------------------------------------------
# the protocol on every record class


def test_every_record_class_is_enumerated() -> None:
    names = {c.__name__ for c in CLASSES}
    # the parts named in the issue, and one record of each module that holds records
    parts = "TraceReport Attempt PartitionHealth LayerDivergence ReportMeta OutputVerdict HaloCompleteness"
    for name in (*parts.split(), "TargetInfo", "ReceptiveField", "AtomErrors", "KernelCall", "OutputFailure"):
        assert name in names
    assert len(CLASSES) >= 30


@pytest.mark.parametrize(("cls", "shape"), _cases())
def test_reads_as_its_json(cls: type[Record], shape: str) -> None:
    record = _instance(cls, shape)
    wire = record.to_dict()
    wire.pop("report_version", None) if cls is TraceReport else None
    assert record.keys() == list(wire), "keys() are the keys to_dict writes, in its order"
    for key in wire:
        assert key in record
        value = record[key]
        tp = _wire_type(record, key)
        encoded = _enc_free(value, (), int_keys=key == "per_rank") if tp is None else encode(value, tp, ())
        assert encoded == wire[key], f"{cls.__name__}[{key!r}] is not the value to_dict writes"
        if tp is not None and is_record(non_null(union_args(tp)) if union_args(tp) else tp) and value is not None:
            assert isinstance(value, Record), f"{cls.__name__}[{key!r}]: a nested part reads as its record"
        assert record.get(key, "absent") is value or record.get(key, "absent") == value
    assert record.values() == [record[k] for k in wire]
    assert record.items() == [(k, record[k]) for k in wire]
    assert dict(record) == dict(record.items())
    assert {**record}.keys() == wire.keys()


@pytest.mark.parametrize(("cls", "shape"), _cases())
def test_absent_keys(cls: type[Record], shape: str) -> None:
    record = _instance(cls, shape)
    missing = {s.key for s in slots(cls)} | set(cls._derived)
    missing -= set(record.keys())
    for key in [*sorted(missing), "no_such_key", "report_version" if cls is TraceReport else "nope"]:
        assert key not in record
        assert record.get(key) is None and record.get(key, 7) == 7
        with pytest.raises(KeyError):
            record[key]
    for not_a_key in (0, None, ("a",)):
        assert not_a_key not in record
        with pytest.raises(KeyError):
            record[not_a_key]  # type: ignore[index]


@pytest.mark.parametrize(("cls", "shape"), _cases())
def test_read_only(cls: type[Record], shape: str) -> None:
    record = _instance(cls, shape)
    before = record.to_dict()
    by_key = {s.key: s.name for s in slots(cls)}
    extra = getattr(record, "extra", {})
    for key in [*record.keys(), "no_such_key"]:
        with pytest.raises(TypeError) as raised:
            record[key] = 1  # type: ignore[index]
        message = str(raised.value)
        if key in extra:
            assert f"record.extra[{key!r}]" in message
        elif key in by_key:
            assert f"record.{by_key[key]} = " in message, message
        elif key in cls._derived:
            assert "derived" in message
        else:
            assert "no key 'no_such_key'" in message and all(k in message for k in by_key)
            assert ("record.extra[" in message) == _is_open(cls)
        with pytest.raises(TypeError):
            del record[key]  # type: ignore[arg-type]
    assert record.to_dict() == before


@pytest.mark.parametrize(("cls", "shape"), _cases())
def test_stays_a_record(cls: type[Record], shape: str) -> None:
    record = _instance(cls, shape)
    assert bool(record) is True, "no __len__: an empty part is still truthy"
    assert not isinstance(record, Mapping), "not a Mapping: code that tells dicts from records keeps working"
    for make in (iter, list, tuple, set):
        with pytest.raises(TypeError, match="not iterable"):
            make(record)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        len(record)  # type: ignore[arg-type]
    assert record != record.to_dict() and record.to_dict() != record
    assert record == dataclasses.replace(record), "equality stays the records' own"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_no_field_shadows_a_mapping_method(cls: type[Record]) -> None:
    names = {s.name for s in slots(cls)} | {s.key for s in slots(cls)} | set(cls._derived)
    assert not names & set(MAPPING_METHODS), f"{cls.__name__} has a field named like a mapping method"
    for method in MAPPING_METHODS:
        assert getattr(cls, method) is getattr(Record, method), f"{cls.__name__}.{method} is overridden"


# --------------------------------------------------------------------------------------------------
# dict-style reads of a real report


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_code_written_for_a_dict_report(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    report = TraceReport.from_dict(data)
    assert report["verdict"] == data["verdict"] and report["ok"] is data["ok"]
    assert report["next_action"] == data["next_action"] and report["spec"] is report.spec
    assert report["best_attempt"] == data["best_attempt"]
    assert report.meta.get("world_size") == data["meta"].get("world_size")
    assert ("world_size" in report.meta) == ("world_size" in data["meta"])
    assert report.meta.get("timings") == data["meta"].get("timings")
    assert (report["meta"].get("wrapper") or {}).get("cutoff") == (data["meta"].get("wrapper") or {}).get("cutoff")
    for attempt, raw in zip(report["attempts"], data["attempts"], strict=True):
        assert attempt["partition_health"]["degenerate"] == raw["partition_health"]["degenerate"]
        assert isinstance(attempt["partition_health"]["degenerate"], list)
        for rank, counts in attempt["partition_health"]["per_rank"].items():
            assert isinstance(rank, int) and counts["owned"] == raw["partition_health"]["per_rank"][str(rank)]["owned"]
        assert ("matches" in attempt["halo_completeness"]) == ("matches" in raw["halo_completeness"])
        for name, verdict in attempt["verdicts"].items():
            assert verdict["passed"] is raw["verdicts"][name]["passed"]
            assert verdict["status"] == raw["verdicts"][name]["status"]
        assert attempt["handler_counts"] == raw["handler_counts"]
        layers, raw_layers = attempt.get("layer_divergence"), raw.get("layer_divergence")
        assert (layers is None) == (raw_layers is None)
        if layers is not None and layers.get("first_divergent") is not None:
            assert layers["first_divergent"]["module"] == raw_layers["first_divergent"]["module"]
            assert layers["first_divergent"]["class"] == raw_layers["first_divergent"]["class"]
        if attempt["error"] is not None:
            assert attempt["error"]["message"] == raw["error"]["message"]
            assert [f["line"] for f in attempt["error"]["frames"]] == [f["line"] for f in raw["error"]["frames"]]
