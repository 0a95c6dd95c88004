"""The report's generated JSON Schema and TypeScript types: current, true to the reader, true to the producers.

- The checked-in `extension/schemas/report.schema.json` and `extension/src/reportSchema.ts` are what
  `python -m distcheck.report` generates now.
- Real reports (the extension's fixtures, written by real runs, and one built in-process with every
  record) validate against the schema; the schema and the strict reader agree on broken documents
  (each refuses them) and on older ones (each accepts them).
- The open parts' typed records (`distcheck.report.parts`) declare every key their producers write,
  so a reader that goes through them (the text renderer does) never misses one.
- The extension's types come from the generated file, and cover every field of the schema.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from distcheck.report import (
    Attempt,
    CrashTrace,
    DeadlineReached,
    DivergentModule,
    DivergentOp,
    Frame,
    HaloCompleteness,
    HelperDiagnosis,
    LayerDivergence,
    OutputVerdict,
    PartitionHealth,
    RankDisagreement,
    ReceptiveField,
    ReportMeta,
    Rollback,
    RoundoffFloor,
    SampleWarning,
    SuspiciousOutput,
    SystemHealth,
    TraceReport,
    UnroutedOp,
    WorkerError,
    view,
)
from distcheck.report.atoms import AtomErrors, RankInterval, WorstAtom
from distcheck.report.codec import Record, slots
from distcheck.report.fixes import SkippedFix, SpecFix
from distcheck.report.kernels import KernelCall, KernelTensor
from distcheck.report.schema import json_schema, schema_text
from distcheck.report.typescript import typescript_text
from distcheck.report.values import _enc_free
from distcheck.spec import HelperAdapter, MLIPSpec
from distcheck.validate.health import halo_completeness, partition_health

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "extension" / "schemas" / "report.schema.json"
TS_FILE = ROOT / "extension" / "src" / "reportSchema.ts"
REPORT_TS = ROOT / "extension" / "src" / "report.ts"
FIXTURES = sorted((ROOT / "tests" / "extension" / "fixtures").glob("*.json"))
REGENERATE = "python -m distcheck.report --write-schema {schema} --write-ts {ts}"


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def _errors(doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(doc)]


# -- generated files are current ----------------------------------------------------------------------


def test_checked_in_schema_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "extension/schemas/report.schema.json is stale: run "
        + REGENERATE.format(schema=SCHEMA_FILE.relative_to(ROOT), ts=TS_FILE.relative_to(ROOT))
    )


def test_checked_in_typescript_types_are_the_generated_ones() -> None:
    assert TS_FILE.read_text(encoding="utf-8") == typescript_text(), (
        "extension/src/reportSchema.ts is stale: run "
        + REGENERATE.format(schema=SCHEMA_FILE.relative_to(ROOT), ts=TS_FILE.relative_to(ROOT))
    )


@pytest.mark.procs
def test_the_command_writes_both_files(tmp_path: Path) -> None:
    schema, ts = tmp_path / "out" / "report.schema.json", tmp_path / "reportSchema.ts"
    cmd = [sys.executable, "-m", "distcheck.report", "--write-schema", str(schema), "--write-ts", str(ts)]
    subprocess.run(cmd, check=True, timeout=60)
    assert schema.read_text(encoding="utf-8") == schema_text()
    assert ts.read_text(encoding="utf-8") == typescript_text()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "distcheck.report",
            "--write-schema",
            str(tmp_path / "out" / "report.schema.json" / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "cannot write" in bad.stderr and "Traceback" not in bad.stderr


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json_schema())


# -- real reports validate ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_reports_validate_and_read(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert _errors(doc) == []
    TraceReport.from_dict(doc)


def _records() -> list[Any]:
    """Two ranks' partition records, the attributes `validate.health` reads."""
    systems = [{"system": 0, "owned": 4, "halo": 2, "remote": 3}, {"system": 1, "owned": 3, "halo": 0, "remote": 0}]
    return [
        SimpleNamespace(
            rank=r, owned=7, halo=2 + r, remote=3, halo_width=2.5, requested_cutoffs=[5.0], per_system=systems
        )
        for r in (0, 1)
    ]


def _layers() -> LayerDivergence:
    torch = pytest.importorskip("torch")
    from distcheck.validate.layers import compare_layers

    ref = [{"key": "body#0", "module": "body", "class": "pkg.Body", "level": "per_atom", "value": torch.ones(3)}]
    ranks = [[{**ref[0], "value": torch.full((3,), 0.75)}], [{**ref[0], "value": torch.full((3,), 0.5)}]]
    return compare_layers(ref, ranks, 1e-6)


def full_report() -> TraceReport:
    """A report holding every record type, its open parts made by their real producers."""
    spec = MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1, "output_kinds": {"energy": "per_graph"}})
    records = _records()
    verdict = OutputVerdict("energy", "per_graph", False, math.inf, math.nan, "mismatch", [1], 1, 2)
    helper = HelperDiagnosis(
        "pkg.ops", "mol_sum", 2, {0: 2, 1: 2}, "per_system_sum", 0.9, "sum_over_ranks_matches_ref", False, False,
        "partial sums", HelperAdapter(kind="reduction", module_path="pkg.ops", attr_name="mol_sum").to_dict(),
        {"file": "/p/ops.py", "line": 3}, ["NaN on rank 1"],
    )  # fmt: skip
    attempt = Attempt(
        index=0, spec=spec, rationale="prior", rule=None, passed=False,
        max_abs_diff={"energy": math.inf}, max_rel_diff={"energy": None}, verdicts={"energy": verdict},
        handler_counts={"halo_read": 3},
        error=WorkerError("RuntimeError", "boom", 1, "forward", [Frame("/p/m.py", 3, "forward")], "fix it", "tb"),
        helper_diagnostics=[helper], layer_divergence=_layers(), partition_health=partition_health(records),
        halo_completeness=halo_completeness(records, "halo", "local", 5.0, 2), timings={"run": 1.0},
        reused_run=True,
        unrouted=[
            UnroutedOp("aten.index_add", "per_atom_to_per_system", "python", 2, "/p/m.py", 9, "f", ranks=[0]),
            UnroutedOp(
                "ns::op", "per_atom_to_per_system", "custom_op", 1, "/p/m.py", 12, "ns::op", ranks=[0],
                kernel=KernelCall(
                    [KernelTensor("0", "per_atom", [5], "float64")], [KernelTensor("0", "per_system", [1], "float64")],
                    {"op": "ns::op", "arg_transforms": {"0": "slice_owned"}, "output_transforms": {}},
                ),
            ),
        ],
        rank_disagreements=[
            RankDisagreement(
                "energy",
                "per_graph",
                [0, 1],
                [1],
                0.5,
                0.1,
                [0],
                DivergentModule("a", "pkg.A", "a#0", [1], 0.5),
                first_op=DivergentOp("Tensor.matmul", "/p/m.py", 7, "Readout.forward", ranks=[0, 1], rel_diff=0.2),
            )
        ],
        rolled_back=Rollback(0, "worse"), crash_traces=[CrashTrace(1, "forward", {"halo_read": 1}, ["a#0"])],
        suspicious=[SuspiciousOutput("energy", "per_graph", 1e-6, 1e-9, 1e3, 100.0)],
        system_health=[SystemHealth(1, 3, 0, 3, 0, 0, "no_halo", "system 1 ...")],
        atom_errors=[
            AtomErrors("forces", 0, 0, 10.0, True, 5.0, 4, 3, [RankInterval(0, 0.0, 5.0), RankInterval(1, 5.0, 10.0)],
                       [WorstAtom(2, 1, 6.5, 0.25, 1)], [0.0, 0.25])
        ],
        fixes=[SpecFix("measured_receptive_field", "set", ["distribution", "policy", "halo_width"], 10.5)],
        skipped_fixes=[SkippedFix("owned_complete_to_local", "a 20 Å halo would leave a rank ...", 20.5)],
    )  # fmt: skip
    return TraceReport(
        ok=False, spec=spec, attempts=[attempt], next_action="FAIL — see above",
        meta={"world_size": 2, "device": "cpu", "devices": ["cpu", "cpu"], "atol": {"energy": 1e-5, "default": 1e-4},
              "rtol": 1e-4, "timings": {"total": 2.0}, "versions": {"distcheck": "0.1.0"}, "root": "/p"},
        target={"name": "m", "factory": {"file": "/p/m.py", "line": 1, "qualname": "make"},
                "sample": {"file": "/p/s.py"}, "spec_path": None, "config": "/p/pyproject.toml"},
        deadline=DeadlineReached(60.0, 61.5, 1, "attempt"),
        receptive_field=ReceptiveField("measured", 5.0, 1, 5.0, 2, 10.0, "forces", 4, True, 10.0, "note"),
        roundoff=RoundoffFloor("measured", {"energy": 1e-9}, {"energy": None}, 100.0, 0.5, "control run"),
        sample_warnings=[SampleWarning("no_cell", "no cell", "give it a cell", [0], ["forces"])],
    )  # fmt: skip


def test_a_report_with_every_record_validates_and_round_trips() -> None:
    report = full_report()
    doc = json.loads(report.to_json())
    assert _errors(doc) == []
    assert TraceReport.from_dict(doc) == report
    every = {type(x).__name__ for x in _walk_records(report)} | {type(f).__name__ for f in report.failures}
    closed = {n for n, d in json_schema()["$defs"].items() if "properties" in d and not _is_open(d)}
    assert report.failures and every >= closed


def _walk_records(value: Any) -> list[Record]:
    found: list[Record] = []
    if isinstance(value, Record):
        found.append(value)
        for s in slots(type(value)):
            found += _walk_records(getattr(value, s.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += _walk_records(item)
    elif isinstance(value, dict):
        for item in value.values():
            found += _walk_records(item)
    return found


def _is_open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties") is True


# -- the schema and the reader agree ------------------------------------------------------------------

_Mutation = Callable[[dict[str, Any]], object]


def _attempt0(doc: dict[str, Any]) -> dict[str, Any]:
    attempt: dict[str, Any] = doc["attempts"][0]
    return attempt


BROKEN: dict[str, _Mutation] = {
    "a required report key missing": lambda d: d.pop("ok"),
    "a required attempt key missing": lambda d: _attempt0(d).pop("verdicts"),
    "a required key of a nested record missing": lambda d: _attempt0(d)["error"]["frames"][0].pop("line"),
    "an unknown report key": lambda d: d.update(surprise=1),
    "an unknown attempt key": lambda d: _attempt0(d).update(surprise=1),
    "an unknown key in a trust check": lambda d: d["roundoff"].update(surprise=1),
    "a string for an integer": lambda d: _attempt0(d)["verdicts"]["energy"].update(n_total="2"),
    "a float for an integer": lambda d: _attempt0(d)["unrouted"][0].update(count=2.5),
    "a word for a number": lambda d: _attempt0(d)["rank_disagreements"][0].update(max_abs="big"),
    "a number for a boolean": lambda d: _attempt0(d).update(passed=1),
    "null for a string": lambda d: _attempt0(d).update(rationale=None),
    "an object for an array": lambda d: _attempt0(d).update(helper_diagnostics={}),
    "an array for an open part": lambda d: _attempt0(d).update(partition_health=[]),
    "an unknown verdict status": lambda d: _attempt0(d)["verdicts"]["energy"].update(status="great"),
    "an unknown aggregation": lambda d: _attempt0(d)["unrouted"][0].update(aggregation="per_everything"),
    "an unknown deadline stage": lambda d: d["deadline"].update(stage="lunch"),
    "an unknown sample warning": lambda d: d["sample_warnings"][0].update(kind="too_small"),
    "a rank key that is not a number": lambda d: _attempt0(d)["helper_diagnostics"][0]["n_calls_per_rank"].update(
        one=2
    ),
    "a newer report version": lambda d: d.update(report_version=99),
    "a spec that is not an object": lambda d: d.update(spec="halo"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_the_schema_refuses_what_the_reader_refuses(name: str) -> None:
    doc = json.loads(full_report().to_json())
    BROKEN[name](doc)
    with pytest.raises(ValueError):
        TraceReport.from_dict(doc)
    assert _errors(doc), f"the schema accepts a document with {name}, which the reader refuses"


OLDER: dict[str, _Mutation] = {
    "no derived keys": lambda d: [
        d.pop("verdict"),
        d.pop("fix_applied"),
        _attempt0(d).pop("failing_outputs"),
        _attempt0(d)["helper_diagnostics"][0].pop("qualname"),
        _attempt0(d)["unrouted"][0].pop("location"),
        _attempt0(d)["rank_disagreements"][0].pop("summary"),
    ],
    "no keys added after version 1": lambda d: [
        _attempt0(d).pop(k)
        for k in ("reused_run", "unrouted", "rank_disagreements", "rolled_back", "crash_traces", "suspicious")
    ],
    "no optional report parts": lambda d: [
        d.pop(k) for k in ("target", "deadline", "best_attempt", "receptive_field", "roundoff", "sample_warnings")
    ],
    "no traceback and no optional check fields": lambda d: [
        _attempt0(d)["error"].pop("traceback"),
        d["roundoff"].pop("note"),
        d["receptive_field"].pop("lower_bound"),
    ],
    "free-form parts with other keys": lambda d: [
        _attempt0(d)["halo_completeness"].update(per_rank={"0": {"missing": 0}}),
        d["meta"].update(anything={"goes": ["here"]}),
    ],
}


@pytest.mark.parametrize("name", list(OLDER))
def test_the_schema_accepts_what_the_reader_accepts(name: str) -> None:
    doc = json.loads(full_report().to_json())
    OLDER[name](doc)
    TraceReport.from_dict(copy.deepcopy(doc))
    assert _errors(doc) == []


# -- the open parts' records match their producers ----------------------------------------------------


def _halo_cases() -> list[HaloCompleteness]:
    records = _records()
    cases = [halo_completeness(records, "replicated", "local", 5.0, 2)]
    for mode in ("halo_correction", "local"):
        for depth in (None, 1, 3):
            cases.append(halo_completeness(records, "halo", mode, 5.0, depth))
    unaware: list[Any] = [SimpleNamespace(**{**vars(r), "requested_cutoffs": []}) for r in records]
    cases.append(
        halo_completeness(
            unaware,
            "halo",
            "halo_correction",
            5.0,
            1,
        )
    )
    return cases  # fmt: skip


def _produced() -> list[tuple[type[Record], Record | dict[str, Any]]]:
    records = _records()
    parts: list[tuple[type[Record], Record | dict[str, Any]]] = [
        (PartitionHealth, partition_health(records)),
        (PartitionHealth, partition_health(records[:1])),
        (PartitionHealth, partition_health([])),
        (LayerDivergence, _layers()),
    ]
    parts += [(HaloCompleteness, h) for h in _halo_cases()]
    for path in FIXTURES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        for a in doc["attempts"]:
            parts += [(PartitionHealth, a["partition_health"]), (HaloCompleteness, a["halo_completeness"])]
            if a["layer_divergence"] is not None:
                parts.append((LayerDivergence, a["layer_divergence"]))
    return parts


def _declared(cls: type[Record]) -> set[str]:
    return {s.key for s in slots(cls)}


def test_every_key_a_producer_writes_is_declared_by_its_part_record() -> None:
    for cls, part in _produced():
        encoded = part.to_dict() if isinstance(part, Record) else _enc_free(part, ())
        assert set(encoded) <= _declared(cls), f"{cls.__name__} lacks {sorted(set(encoded) - _declared(cls))}"
        typed = (part if isinstance(part, Record) else view(cls, part)).to_dict()
        assert {k: typed[k] for k in encoded} == encoded, f"{cls.__name__} mistypes a key its producer writes"


def test_the_meta_record_reads_real_meta_with_the_right_types() -> None:
    for path in FIXTURES:
        meta = json.loads(path.read_text(encoding="utf-8"))["meta"]
        typed = view(ReportMeta, meta).to_dict()
        known = {k: v for k, v in meta.items() if k in _declared(ReportMeta)}
        # a key holding None is not written back (ReportMeta records only what is known)
        assert {k: typed.get(k) for k in known} == known, f"{path.name}: ReportMeta mistypes a key of meta"
        assert len(known) >= len(meta) - 2, (
            f"{path.name}: meta keys ReportMeta does not declare: {set(meta) - set(known)}"
        )


def test_the_renderer_reads_the_parts_producers_write() -> None:
    report = full_report()
    halo = report.attempts[0].halo_completeness
    assert halo.matches is False
    text = report.render_text()
    assert "halo incomplete: " + halo.interpretation.split("\n")[0][:40] in text
    assert "first divergent module: body (pkg.Body), rel diff 0.25" in text
    assert "partition: rank 0: owned 7 halo 2 remote 3; rank 1: owned 7 halo 3 remote 3" in text
    assert "target: make (/p/m.py:1)" in text


# -- the extension's types ----------------------------------------------------------------------------


def _ts_interfaces(text: str) -> dict[str, dict[str, tuple[bool, str]]]:
    """`name -> {property: (optional, type)}` of every `export interface` in TypeScript source `text`."""
    found: dict[str, dict[str, tuple[bool, str]]] = {}
    for m in re.finditer(r"export interface (\w+) \{\n(.*?)\n\}", text, re.S):
        props = {}
        for line in m.group(2).splitlines():
            p = re.fullmatch(r"  (\w+)(\??): (.+);", line)
            if p:
                props[p.group(1)] = (p.group(2) == "?", p.group(3))
        found[m.group(1)] = props
    return found


def _admits(ts_type: str, value: Any) -> bool:
    """Does the TypeScript type `ts_type` (as the generator writes them) admit the JSON `value`?"""
    members = [t.strip() for t in re.split(r"\|(?![^<]*>)", ts_type)]
    if "unknown" in members:
        return True
    if value is None:
        return "null" in members
    if isinstance(value, bool):
        return "boolean" in members
    if isinstance(value, (int, float)):
        return "number" in members or "JsonNumber" in members
    if isinstance(value, str):
        literal = json.dumps(value)
        nonfinite = value in ("NaN", "Infinity", "-Infinity") and "JsonNumber" in members
        return "string" in members or literal in members or nonfinite
    if isinstance(value, list):
        return any(m.endswith("[]") or m.startswith("Array<") for m in members)
    return any(m.startswith("Record<") or m.endswith("Json") for m in members)


def test_report_ts_takes_its_report_types_from_the_generated_file() -> None:
    source = REPORT_TS.read_text(encoding="utf-8")
    generated = set(re.findall(r"export (?:interface|type) (\w+)", TS_FILE.read_text(encoding="utf-8")))
    own = set(re.findall(r"^(?:export )?(?:interface|type) (\w+)\b(?! from)", source, re.M))
    assert not own & generated, f"report.ts declares its own copy of generated types: {sorted(own & generated)}"
    assert re.search(r'import \{[^}]*\bAttemptJson\b[^}]*\bReportJson\b[^}]*\} from "\./reportSchema"', source)
    assert re.search(r'export type \{[^}]*\bReportJson\b[^}]*\} from "\./reportSchema"', source, re.S)


@pytest.mark.parametrize(("ts_name", "where"), [("ReportJson", None), ("AttemptJson", "Attempt")])
def test_the_typescript_types_declare_every_schema_field(ts_name: str, where: str | None) -> None:
    schema = json_schema()
    sub = schema if where is None else schema["$defs"][where]
    props = _ts_interfaces(TS_FILE.read_text(encoding="utf-8"))[ts_name]
    assert set(props) == set(sub["properties"])
    required = set(sub.get("required", []))
    for key, (optional, _) in props.items():
        assert optional == (key not in required), f"{ts_name}.{key}: optional in TS must mean optional in the schema"
    docs = [full_report().to_dict()] + [json.loads(p.read_text(encoding="utf-8")) for p in FIXTURES]
    for doc in docs:
        for obj in [doc] if where is None else doc["attempts"]:
            for key, value in obj.items():
                assert _admits(props[key][1], value), f"{ts_name}.{key}: {props[key][1]} does not admit {value!r:.80}"


ODD_PARTS: dict[str, dict[str, Any]] = {
    "per_rank as a list": {"partition_health": {"per_rank": [1, 2], "degenerate": []}},
    "rank counts as numbers": {"partition_health": {"per_rank": {0: 7, 1: 5}, "degenerate": []}},
    "a count as text": {"partition_health": {"per_rank": {0: {"owned": "many"}}, "degenerate": []}},
    "matches as text": {"halo_completeness": {"matches": "no", "interpretation": 3}},
    "first_divergent as text": {"layer_divergence": {"first_divergent": "body", "checked": "all"}},
    "an older layer shape": {"layer_divergence": {"first_module": "body", "file": "/p/m.py", "line": 3}},
}


def _holds(written: Any, given: Any) -> bool:
    """Does `written` hold every key and value of `given` (objects may have gained defaulted keys)?"""
    if isinstance(given, dict):
        return isinstance(written, dict) and all(k in written and _holds(written[k], v) for k, v in given.items())
    return bool(written == given)


@pytest.mark.parametrize("name", list(ODD_PARTS))
def test_odd_parts_read_as_defaults_and_keep_what_they_held(name: str) -> None:
    doc = full_report().to_dict()
    for key, value in ODD_PARTS[name].items():
        doc["attempts"][0][key] = _enc_free(value, ())
    report = TraceReport.from_dict(doc)
    attempt = report.attempts[0]
    assert isinstance(attempt.partition_health, PartitionHealth)
    assert isinstance(attempt.halo_completeness, HaloCompleteness)
    assert attempt.layer_divergence is None or isinstance(attempt.layer_divergence, LayerDivergence)
    for key, value in ODD_PARTS[name].items():  # mistyped or unknown keys: defaults, the values kept in `extra`
        written = report.to_dict()["attempts"][0][key]
        assert _holds(written, _enc_free(value, ())), f"{key}: {written} lost some of what it held"
    text = report.render_text()
    assert text.startswith(report.verdict.upper()) and "Traceback" not in text
    again = TraceReport.from_json(report.to_json())
    assert again == report


def test_the_records_hold_their_open_parts_typed() -> None:
    report = full_report()
    attempt = report.attempts[0]
    health = attempt.partition_health
    assert health.per_rank[1].halo == 3 and health.degenerate == attempt.degenerate
    assert attempt.halo_completeness.matches is False and attempt.halo_completeness.halo_width == 2.5
    layers = attempt.layer_divergence
    assert layers is not None and layers.first_divergent is not None
    assert (layers.first_divergent.cls, layers.checked) == ("pkg.Body", 1)
    assert report.meta.atol == {"energy": 1e-5, "default": 1e-4} and report.meta.world_size == 2
    target = report.target
    assert target is not None and target.factory is not None and target.factory.qualname == "make"
    again = TraceReport.from_json(report.to_json())
    assert again.meta == report.meta and again.target is not None and again.target.factory == target.factory


def test_a_dict_given_for_an_open_part_is_read_as_its_record() -> None:
    attempt = full_report().attempts[0]
    fields = {f.name: getattr(attempt, f.name) for f in dataclasses.fields(attempt)}
    fields.update(
        partition_health={"per_rank": {0: {"owned": 4, "halo": 1, "remote": 2}}, "degenerate": ["x"]},
        halo_completeness={},
        layer_divergence={"first_divergent": None, "checked": 2, "max_rel_diff": 0.0},
    )
    again = Attempt(**fields)
    assert again.partition_health.per_rank[0].remote == 2 and again.degenerate == ["x"]
    assert again.halo_completeness.matches is None and again.to_dict()["halo_completeness"] == {}
    assert again.layer_divergence is not None and again.layer_divergence.checked == 2
